#!/bin/sh
# kdd: managed hook shim (installed by `kdd install`; safe to re-run).
# Runs the hook that was here before kdd (saved as <hook>.pre-kdd) first, then `kdd-hook <hook>`.
# kdd-hook never blocks a commit because of its own trouble; KDD_HOOK=0 disables it.
hook=$(basename "$0")
prev="$(dirname "$0")/$hook.pre-kdd"
if [ -x "$prev" ]; then
  "$prev" "$@" || exit $?
fi
[ "${KDD_HOOK:-1}" = "0" ] && exit 0
bin="${KDD_HOOK_BIN:-@KDD_HOOK_BIN@}"
if [ ! -x "$bin" ]; then
  bin=$(command -v kdd-hook 2>/dev/null) || bin=""
fi
if [ -z "$bin" ]; then
  echo "kdd: kdd-hook not found; .kdd-index/ was not updated (install kdd, then run \`kdd resolve\`)" >&2
  exit 0
fi
exec "$bin" "$hook" "$@"
