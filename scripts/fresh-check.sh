#!/usr/bin/env bash
# scripts/fresh-check.sh [--mirror URL] [--keep] [--with-cuda] [--nice N] [COMMIT]: the README's two commands on a
# bare Debian 12. Builds a minimal bookworm root with debootstrap (Debian's packages only) in
# build/fresh-root/root, copies in a clean clone of COMMIT (default HEAD: committed work only) and
# ../shared/traces/public (read-only, where the tests look for it), and runs scripts/demo.sh, then
# scripts/test.sh inside it with chroot, as a user with sudo (install-deps.sh installs what they
# need, as on a newcomer's machine). Fails on any error; prints the time of each step and test.sh's
# last lines. Needs root (debootstrap, chroot, mount) and a reachable Debian mirror. Slow: a full
# build without ccache (48 min on 2 shared cores, docs/install.md); it runs under `nice`, not in CI.
#   --mirror URL  Debian mirror (default http://deb.debian.org/debian; security updates come from
#                 the matching debian-security)
#   --keep        leave the root in place afterwards (it is removed at the start of the next run anyway)
#   --with-cuda   bind /usr/local/cuda (NVIDIA's toolkit, not a Debian package) read-only into the
#                 root, so the tracer is built and tested too
#   --nice N      the niceness the two commands run at (default 10: the machine stays usable)
# Logs: build/fresh-root/{debootstrap,demo,test}.log.
set -euo pipefail
mirror=http://deb.debian.org/debian
keep=0
with_cuda=0
niceness=10
commit=HEAD
while [ $# -gt 0 ]; do
  case "$1" in
    --mirror) mirror=$2; shift 2 ;;
    --keep) keep=1; shift ;;
    --with-cuda) with_cuda=1; shift ;;
    --nice) niceness=$2; shift 2 ;;
    -h|--help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    -*) echo "fresh-check: unknown option $1 (see --help)" >&2; exit 2 ;;
    *) commit=$1; shift ;;
  esac
done
[ "$(id -u)" -eq 0 ] || { echo "fresh-check: needs root (debootstrap, chroot, mount)" >&2; exit 1; }
command -v debootstrap >/dev/null || { echo "fresh-check: apt-get install debootstrap" >&2; exit 1; }

src=$(cd "$(dirname "$0")/.." && pwd)
sha=$(git -C "$src" rev-parse --verify "$commit^{commit}")
work=$src/build/fresh-root
root=$work/root
user=newcomer
home=/home/$user
traces=$src/../shared/traces/public

# The mounts at or below the root, innermost first (from /proc/self/mounts: `findmnt -R` lists
# nothing when the root itself is no mount point, and so missed them all in the first run).
mounts_below_root() {
  awk -v r="$root" '$2 == r || index($2, r "/") == 1 { print $2 }' /proc/self/mounts | sort -r
}
unmount_all() {
  local m
  for m in $(mounts_below_root); do
    umount "$m" 2>/dev/null || umount -l "$m" # lazily if something still holds it
  done
}
cleanup() {
  local rc=$?
  unmount_all
  if [ -n "$(mounts_below_root)" ]; then
    echo "fresh-check: still mounted below $root (not removed):" $(mounts_below_root) >&2
    [ "$rc" -ne 0 ] || rc=1
  elif [ "$keep" -eq 0 ] && [ -d "$root" ]; then
    rm -rf --one-file-system "$root"
  fi
  exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

step_start=0
start() { step_start=$(date +%s); echo "fresh-check: $1 ..."; }
timings=()
done_step() {
  local s=$(( $(date +%s) - step_start ))
  timings+=("$(printf '%-44s %3dm%02ds' "$1" $((s / 60)) $((s % 60)))")
  echo "fresh-check: $1: $((s / 60))m$((s % 60))s"
}
in_root() { chroot "$root" /usr/bin/env -i PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
  LANG=C.UTF-8 DEBIAN_FRONTEND=noninteractive "$@"; }
as_user() { in_root /usr/sbin/runuser -u "$user" -- /usr/bin/env HOME="$home" USER="$user" TERM=dumb \
  nice -n "$niceness" bash -c "$1"; }

total_start=$(date +%s)
mkdir -p "$work"
if [ -e "$root" ]; then
  unmount_all
  [ -z "$(mounts_below_root)" ] || { echo "fresh-check: cannot unmount below $root:" $(mounts_below_root) >&2; exit 1; }
  rm -rf --one-file-system "$root"
fi

start "debootstrap --variant=minbase bookworm"
debootstrap --variant=minbase bookworm "$root" "$mirror" >"$work/debootstrap.log" 2>&1 \
  || { tail -n 20 "$work/debootstrap.log"; exit 1; }
done_step "debootstrap (minimal bookworm root)"

start "setting up the machine: apt sources, mounts, a user with sudo"
security=${mirror%/debian}/debian-security
cat >"$root/etc/apt/sources.list" <<EOF
deb $mirror bookworm main
deb $mirror bookworm-updates main
deb $security bookworm-security main
EOF
cp /etc/resolv.conf "$root/etc/resolv.conf"
echo "127.0.0.1 localhost $(hostname)" >"$root/etc/hosts"
printf '#!/bin/sh\nexit 101\n' >"$root/usr/sbin/policy-rc.d" # no daemons start in the root
chmod +x "$root/usr/sbin/policy-rc.d"
mount -t proc proc "$root/proc"
mount -t sysfs sysfs "$root/sys"
mount --rbind /dev "$root/dev"
mount --make-rslave "$root/dev"
if [ "$with_cuda" -eq 1 ]; then
  [ -d /usr/local/cuda/ ] || { echo "fresh-check: --with-cuda: no /usr/local/cuda here" >&2; exit 1; }
  mkdir -p "$root/usr/local/cuda"
  mount --bind "$(readlink -f /usr/local/cuda)" "$root/usr/local/cuda"
  mount -o remount,bind,ro "$root/usr/local/cuda"
fi
in_root apt-get update -qq
in_root apt-get install -y -qq --no-install-recommends sudo >/dev/null
in_root useradd -m -s /bin/bash "$user"
echo "$user ALL=(ALL) NOPASSWD:ALL" >"$root/etc/sudoers.d/$user"
chmod 0440 "$root/etc/sudoers.d/$user"
done_step "machine setup (apt sources, sudo, user)"

start "copying a clean clone of $sha"
git clone -q --no-hardlinks "$src" "$root$home/gpumem"
git -C "$root$home/gpumem" checkout -q --detach "$sha"
git -C "$root$home/gpumem" remote remove origin
if [ -d "$traces" ]; then
  mkdir -p "$root$home/shared/traces"
  cp -a "$traces" "$root$home/shared/traces/public"
  chmod -R a-w "$root$home/shared/traces/public"
else
  echo "fresh-check: no $traces here: the tests that read the public traces will skip" >&2
fi
in_root chown -R "$user:$user" "$home/gpumem"
done_step "clean clone and the public traces"

start "scripts/demo.sh (installs the dependencies, builds gpumem, runs the demo)"
as_user "cd ~/gpumem && scripts/demo.sh" >"$work/demo.log" 2>&1 || { tail -n 40 "$work/demo.log"; echo "fresh-check: scripts/demo.sh FAILED (log: $work/demo.log)" >&2; exit 1; }
done_step "scripts/demo.sh"

start "scripts/test.sh (ci build, every test, the zlib build, the package)"
as_user "cd ~/gpumem && scripts/test.sh" >"$work/test.log" 2>&1 || { tail -n 60 "$work/test.log"; echo "fresh-check: scripts/test.sh FAILED (log: $work/test.log)" >&2; exit 1; }
done_step "scripts/test.sh"

total=$(( $(date +%s) - total_start ))
echo
echo "fresh-check: passed on a bare Debian 12 for $sha"
printf '  %s\n' "${timings[@]}"
printf '  %-44s %3dm%02ds\n' "total" $((total / 60)) $((total % 60))
echo "test.sh's last lines:"
grep '^test.sh: ' "$work/test.log" | tail -n 8 | sed 's/^/  /'
