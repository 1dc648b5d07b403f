# Recovery Console — the two commands are `make run` and `make test`.
SHELL := /bin/bash
PYTHON ?= python3.11
VENV := .venv
BIN := $(VENV)/bin
PORT ?= 8000
# The demo fleet's resume server and ledgers follow PORT (8000 -> 8765), so two copies do not collide.
FLEET_PORT ?= $(shell echo $$(( $(PORT) + 765 )))
STAMP := $(VENV)/.installed
# make run SSO=1: a test OpenID Connect provider beside the console (demo/sso.py), on the next port.
SSO ?=
SSO_PORT ?= $(shell echo $$(( $(PORT) + 1 )))
PROCESSES := web worker beat relay fleet $(if $(SSO),sso)

.PHONY: run test test-fast setup install lock bench chaos failover-drill screenshots lint clean

## run: set everything up and start web, worker, beat, relay and the demo fleet (Ctrl-C stops all);
## DEMO_APPS=true installs the demo app (demo/: seed_demo, run_demo_fleet) whatever .env says;
## SSO=1 adds an OpenID Connect provider on PORT+1 (SSO_PORT) and signs in through it (README "Single sign-on")
run: setup
	@for p in $(PORT) $(FLEET_PORT) $(if $(SSO),$(SSO_PORT)); do $(BIN)/python -c "import socket,sys; s=socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1); s.bind(('127.0.0.1', $$p))" 2>/dev/null \
	  || { echo "Port $$p is busy (another copy?): try make run PORT=$$(( $(PORT) + 1 )) (the fleet takes PORT+765, or set FLEET_PORT)"; exit 1; }; done
	@DEMO_APPS=true $(BIN)/python manage.py seed_demo --port $(PORT) --fleet-port $(FLEET_PORT)
	@$(if $(SSO),DEMO_APPS=true $(BIN)/python manage.py seed_sso && $(BIN)/python -m demo.sso prepare --port $(SSO_PORT) --console http://127.0.0.1:$(PORT),true)
	@echo ""
	@echo "  Recovery Console: http://127.0.0.1:$(PORT)/   (Ctrl-C stops everything)"
	@echo "  Demo ledgers:     http://127.0.0.1:$(FLEET_PORT)/ledgers   (what the simulated systems really did)"
	@echo "  Simulated Slack:  http://127.0.0.1:$(FLEET_PORT)/slack     (checkpoints posted and decided from \"Slack\")"
	@$(if $(SSO),echo "  Single sign-on:   http://127.0.0.1:$(SSO_PORT)/   (a test identity provider; people and passwords printed by its process)",true)
	@echo ""
	@$(if $(SSO),eval "$$($(BIN)/python -m demo.sso env --port $(SSO_PORT) --console http://127.0.0.1:$(PORT))";) \
	  CONSOLE_PORT=$(PORT) FLEET_PORT=$(FLEET_PORT) SSO_PORT=$(SSO_PORT) SLACK_API_URL=http://127.0.0.1:$(FLEET_PORT)/slack/api/ DEMO_LEDGERS_URL=http://127.0.0.1:$(FLEET_PORT)/ledgers DEMO_APPS=true \
	  QUIET_POLL_LOGS=1 exec $(BIN)/honcho --no-colour -f Procfile.dev start $(PROCESSES)

## test: set everything up and run the whole suite
# Tests need no real secret; settings load before any conftest, so the defaults come from here.
test: install
	@$(BIN)/python scripts/ensure_browser.py
	SECRET_KEY=$${SECRET_KEY:-test-only-secret-key} MANIFEST_STATIC=false DEMO_APPS=$${DEMO_APPS:-true} $(BIN)/pytest $(PYTEST_ARGS)

## test-fast: the quick loop: the embedded default (SQLite, no servers), no browser or slow tests, the first
## failure stops it, one process per core (pytest-xdist; each worker has a test database of its own)
test-fast: install
	DATABASE_URL=sqlite:///$(CURDIR)/var/console.sqlite3 CELERY_BROKER_URL=filesystem:// CACHE_URL=locmemcache:// \
	  REQUIRE_FULL_STACK= SECRET_KEY=$${SECRET_KEY:-test-only-secret-key} MANIFEST_STATIC=false DEMO_APPS=$${DEMO_APPS:-true} \
	  $(BIN)/pytest -x -q -n auto -m "not browser and not slow" $(PYTEST_ARGS)

setup: install .env
	@$(BIN)/python manage.py migrate --noinput -v 0

install: $(STAMP)

$(STAMP): requirements.lock pyproject.toml clients/python/pyproject.toml
	@command -v $(PYTHON) >/dev/null || { echo "Python 3.11 is required ($(PYTHON) not found)"; exit 1; }
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --disable-pip-version-check -r requirements.lock
	$(BIN)/pip install -q --disable-pip-version-check --no-deps -e .
	$(BIN)/pip install -q --disable-pip-version-check --no-deps -e ./clients/python
	@touch $(STAMP)

# A local .env for the embedded default: DEBUG on and a random secret, never committed.
.env:
	@sed -e "s/^SECRET_KEY=.*/SECRET_KEY=$$($(BIN)/python -c 'import secrets; print(secrets.token_urlsafe(40))')/" \
	     -e "s/^DEBUG=.*/DEBUG=true/" .env.example > .env
	@echo "wrote .env (DEBUG on, random SECRET_KEY) for the embedded default"

## lock: re-resolve requirements.lock from pyproject.toml (pip-tools)
lock: install
	$(BIN)/pip-compile -q --extra dev --strip-extras --no-emit-index-url --no-emit-find-links -o requirements.lock pyproject.toml

## bench: speed and memory ratios, measured side by side in one run
bench: install
	$(BIN)/pip install -q --disable-pip-version-check -e ".[bench]"
	$(BIN)/python -m scripts.bench $(BENCH_ARGS)

## screenshots: regenerate docs/screenshots/*.png from realistic data (the README shows them)
screenshots: install
	$(BIN)/python scripts/screenshots.py

## chaos: the demo fleet under faults, with workers and web killed at random
chaos: install
	$(BIN)/python -m scripts.chaos $(CHAOS_ARGS)

## failover-drill: the article's test on a scratch console: an agent silent for ten minutes, failed over, back
failover-drill: install
	$(BIN)/python scripts/failover_drill.py $(DRILL_ARGS)

## lint: ruff, then mypy (strict on the app, relaxed for tests/ and scripts/, with django-stubs; see pyproject.toml)
lint: install
	$(BIN)/ruff format --check .
	$(BIN)/ruff check .
	SECRET_KEY=$${SECRET_KEY:-lint-only-secret-key} $(BIN)/mypy

clean:
	rm -rf var .pytest_cache
