# Production image: gunicorn serves the console (whitenoise serves static files);
# the same image runs the Celery worker, beat and the outbox relay.
FROM python:3.11-slim-bookworm

ENV PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1 PIP_DISABLE_PIP_VERSION_CHECK=1 VAR_DIR=/app/var
WORKDIR /app

COPY requirements.lock pyproject.toml ./
RUN pip install --no-cache-dir -r requirements.lock
COPY . .
RUN pip install --no-cache-dir --no-deps ./clients/python . \
 && DEBUG=true SECRET_KEY=build-only python manage.py collectstatic --noinput -v 0 \
 && useradd --system --home /app console && mkdir -p /app/var && chown -R console /app/var
USER console
EXPOSE 8000
# The one gunicorn config (console/gunicorn.py): the shared-cache guard, threads and keep-alive.
CMD ["gunicorn", "-c", "python:console.gunicorn", "console.wsgi"]
