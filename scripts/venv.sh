# Sourced by scripts/run and scripts/test: a project virtual environment in .venv, (re)installed
# when pyproject.toml or a lock changes, then put first on PATH. The runtime dependencies are
# held to requirements.lock's versions (the image's, which the tests were run with), the build's
# to requirements-build.lock and the development tools to requirements-dev.lock, so that a new
# release reaches development and CI only when a lock is renewed; the runtime lock's hashes are
# left out, since an editable install cannot be hashed.
python=${PYTHON:-python3}
stamp=.venv/.installed-$(cat pyproject.toml requirements.lock requirements-build.lock requirements-dev.lock | sha256sum | cut -c1-16)
if [ ! -f "$stamp" ]; then
  [ -x .venv/bin/python ] || "$python" -m venv .venv
  .venv/bin/python -m pip install -qq --upgrade pip
  # the image's setuptools: the tests build the wheel without build isolation, as the image does
  .venv/bin/python -m pip install -qq --require-hashes -r requirements-build.lock
  grep -hE '^[A-Za-z0-9_.-]+==' requirements.lock requirements-dev.lock | sed 's/ *\\$//' > .venv/constraints.txt
  .venv/bin/python -m pip install -qq -c .venv/constraints.txt -e '.[dev]'
  rm -f .venv/.installed-*
  touch "$stamp"
fi
export PATH="$PWD/.venv/bin:$PATH"
