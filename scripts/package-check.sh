#!/usr/bin/env bash
# scripts/package-check.sh [BUILD_DIR]: builds the .deb of a built tree (default build/ci) with CPack,
# unpacks it into a temporary root (dpkg -x: no root rights, nothing installed on this machine) and
# runs what it installed from there: `gpumem --version`, `gpumem info` on the bundled trace against
# its golden output, `gpumem record --print-paths` (the tracer and the Python helper must resolve
# inside the unpacked tree, not the build tree), `gpumem-gui --version`, a man page per verb, and
# the bash completion listing every verb. Prints one line per check; exits non-zero on the first
# failure. docs/install.md describes the layout.
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build/ci}
cache=$build/CMakeCache.txt
[ -f "$cache" ] || { echo "package-check: $build is not a configured build folder (no CMakeCache.txt)" >&2; exit 1; }
option() { sed -n "s/^$1:[A-Z]*=//p" "$cache"; }
is_on() { case "$(option "$1")" in ON|TRUE|1|YES) return 0 ;; *) return 1 ;; esac; }

fail() { echo "package-check: FAILED: $*" >&2; exit 1; }
ok() { echo "package-check: ok: $*"; }

rm -f "$build"/gpumem_*.deb
(cd "$build" && cpack -G DEB >cpack.log 2>&1) || { cat "$build/cpack.log" >&2; fail "cpack -G DEB in $build"; }
debs=("$build"/gpumem_*.deb)
[ -f "${debs[0]}" ] || fail "cpack wrote no gpumem_*.deb in $build"
deb=${debs[0]}
ok "built $deb ($(du -k "$deb" | cut -f1) KiB)"

root=$(mktemp -d "${TMPDIR:-/tmp}/gpumem-package.XXXXXX")
trap 'rm -rf "$root"' EXIT
dpkg -x "$deb" "$root"
gpumem=$root/usr/bin/gpumem
[ -x "$gpumem" ] || fail "$deb has no usr/bin/gpumem"

depends=$(dpkg-deb -f "$deb" Depends)
for lib in libc6 libstdc++6 libboost-program-options; do
  [[ $depends == *"$lib"* ]] || fail "Depends lacks $lib: $depends"
done
ok "Depends: $depends"

version=$(sed -n 's/^CMAKE_PROJECT_VERSION:[A-Z]*=//p' "$cache")
[ "$("$gpumem" --version)" = "gpumem $version" ] || fail "installed gpumem --version says '$("$gpumem" --version)', not 'gpumem $version'"
ok "gpumem --version: gpumem $version"

# The golden output of the bundled trace (tests/cli/info_golden_test.cpp runs it from the source folder).
"$gpumem" info traces/mlp_train.jsonl >"$root/info.txt" || fail "installed gpumem info traces/mlp_train.jsonl"
diff -u tests/cli/golden/traces_mlp_train.jsonl.info.txt "$root/info.txt" || fail "gpumem info differs from its golden output"
"$gpumem" info "$root/usr/share/gpumem/traces/mlp_train.jsonl" >/dev/null || fail "gpumem info on the installed sample trace"
ok "gpumem info traces/mlp_train.jsonl matches tests/cli/golden; the installed sample trace reads"

if is_on GPUMEM_BUILD_TRACER; then
  paths=$(env -u GPUMEM_TRACER_LIBRARY -u GPUMEM_PYTHON_HELPER_DIR "$gpumem" record --print-paths) \
    || fail "installed gpumem record --print-paths: $paths"
  tracer=$(sed -n 's/^libgpumem_tracer.so: //p' <<<"$paths")
  helper=$(sed -n 's/^python helper: //p' <<<"$paths")
  [[ $tracer == "$root"/usr/lib/* && -f $tracer ]] || fail "the installed gpumem record resolves the tracer to '$tracer', not inside $root/usr/lib"
  [[ $helper == "$root"/usr/share/gpumem/python && -f $helper/sitecustomize.py ]] \
    || fail "the installed gpumem record resolves the Python helper to '$helper'"
  ok "gpumem record --print-paths: ${tracer#"$root"}, ${helper#"$root"} (inside the unpacked tree)"
else
  ok "tracer not built (no CUDA toolkit): no libgpumem_tracer.so in the package"
fi

if is_on GPUMEM_BUILD_GUI; then
  [ "$(QT_QPA_PLATFORM=offscreen "$root/usr/bin/gpumem-gui" --version)" = "gpumem-gui $version" ] \
    || fail "installed gpumem-gui --version"
  ok "gpumem-gui --version: gpumem-gui $version"
fi

# Every verb has its man page, and the completion installed offers every verb.
mapfile -t verbs < <("$gpumem" __complete "" | grep -vx help)
[ ${#verbs[@]} -ge 9 ] || fail "gpumem __complete lists only ${#verbs[@]} verbs"
if is_on GPUMEM_BUILD_MAN_PAGES; then
  for page in gpumem "${verbs[@]/#/gpumem-}"; do
    f=$root/usr/share/man/man1/$page.1.gz
    zcat "$f" 2>/dev/null | grep -q '^\.TH' || fail "no man page $f"
  done
  ok "man pages: gpumem(1) and ${#verbs[@]} verb pages"
fi
completion=$root/usr/share/bash-completion/completions/gpumem
offered=$(bash -c 'source "$1"; COMP_WORDS=("$2" ""); COMP_CWORD=1; _gpumem; printf "%s\n" "${COMPREPLY[@]}"' _ "$completion" "$gpumem" | grep -vx help)
[ "$offered" = "$(printf '%s\n' "${verbs[@]}")" ] || fail "the installed completion offers '$offered'"
ok "bash completion offers the ${#verbs[@]} verbs"
