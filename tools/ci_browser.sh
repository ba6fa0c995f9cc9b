#!/usr/bin/env bash
# The studio's browser test needs a Chromium on the machine (Playwright for Python drives the system browser;
# its own browser downloads are not used). Install Debian's when it is missing; say so and go on when it cannot
# be installed (the test then skips with the reason). Called by .ci/run before pytest.
set -u
if command -v chromium >/dev/null 2>&1 || command -v chromium-browser >/dev/null 2>&1; then
  echo "ci_browser: $(command -v chromium || command -v chromium-browser) is there"
  exit 0
fi
if command -v apt-get >/dev/null 2>&1 && [ "$(id -u)" = 0 ]; then
  echo "ci_browser: installing Debian's chromium for the studio's browser test"
  apt-get update -qq >/dev/null && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null \
    && echo "ci_browser: $(chromium --version 2>/dev/null)" && exit 0
fi
echo "ci_browser: no chromium and none installed: tests/studio/test_studio_browser.py will skip"
exit 0
