# Chromium for the console's browser tests (tests/integration/test_console_browser.py): Debian's package,
# driven by Playwright for Python (pyproject.toml's test extras) through executable_path, so Playwright never
# downloads a browser of its own. Not a server and not in stack.sh's ALL (the demo does not need it):
# `make test` and `make test-integration` run `bash stack/stack.sh up chromium`, which installs it once
# (apt_install; skipped at once when $CHROMIUM exists) and checks that Playwright can be imported.
# fonts-dejavu-core: a fresh machine may have no font at all, and the screenshots need one.
CHROMIUM=${CHROMIUM:-/usr/bin/chromium}

chromium_install() {
  [ -x "$CHROMIUM" ] && return 0
  apt_install chromium fonts-dejavu-core
  [ -x "$CHROMIUM" ] || die "chromium: apt-get installed the package but $CHROMIUM is missing"
}

# Nothing to start (each test session launches its own: tests/integration/conftest.py, browser); checks
# that both halves are there.
chromium_start() {
  chromium_health || die "chromium: $CHROMIUM or Playwright in $VENV is missing (make venv installs Playwright)"
}
chromium_stop()  { :; }

chromium_health() {
  [ -x "$CHROMIUM" ] && "$VENV/bin/python" -c 'import playwright.sync_api' 2>/dev/null
}

chromium_describe() {
  local v; v=$("$CHROMIUM" --version 2>/dev/null)
  echo "${v:-chromium ?} at $CHROMIUM, playwright $("$VENV/bin/python" -c \
    'from importlib.metadata import version; print(version("playwright"))' 2>/dev/null || echo missing)"
}
