# Sourced by bench/scale.sh and bench/convert_scale.sh: measure "$@" runs a command under
# `prlimit --as=$limitBytes` and GNU time, its stdout to $tmp/out and stderr to $tmp/stderr, and sets
# cpu (user + system seconds), kib (peak RSS in KiB) and ok (1 when it exited 0, else 0).
cpu="" kib="" ok=0
measure() {
  if prlimit --as="$limitBytes" /usr/bin/time -f "%U %S %M" -o "$tmp/time" "$@" >"$tmp/out" 2>"$tmp/stderr"; then
    ok=1
  else
    ok=0
  fi
  read -r user sys kib < <(tail -n 1 "$tmp/time")
  cpu=$(awk -v u="$user" -v s="$sys" 'BEGIN { printf "%.2f", u + s }')
}
