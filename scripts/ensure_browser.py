"""Make sure Debian's Chromium is there for the browser tests (Playwright drives /usr/bin/chromium).

Installs it with apt-get when running as root; otherwise says how, and the
browser tests are skipped with that reason (CI runs as root and installs it).
"""

import os
import shutil
import subprocess
import sys

CHROMIUM = "/usr/bin/chromium"

if os.path.exists(CHROMIUM):
    sys.exit(0)
if os.geteuid() == 0 and shutil.which("apt-get"):
    print("Installing Debian's chromium for the browser tests (apt-get)…", flush=True)
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    subprocess.run(["apt-get", "update", "-q"], check=True, env=env)
    subprocess.run(["apt-get", "install", "-y", "-q", "chromium"], check=True, env=env)
else:
    print(f"{CHROMIUM} is missing: browser tests will be skipped. Install it with: sudo apt-get install chromium")
