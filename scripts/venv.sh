# Sourced by scripts/run and scripts/test: a project virtual environment in .venv, (re)installed
# when pyproject.toml changes, then put first on PATH.
python=${PYTHON:-python3}
stamp=.venv/.installed-$(sha256sum pyproject.toml | cut -c1-16)
if [ ! -f "$stamp" ]; then
  [ -x .venv/bin/python ] || "$python" -m venv .venv
  .venv/bin/python -m pip install -qq --upgrade pip
  .venv/bin/python -m pip install -qq -e '.[dev]'
  rm -f .venv/.installed-*
  touch "$stamp"
fi
export PATH="$PWD/.venv/bin:$PATH"
