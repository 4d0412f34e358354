"""The shell the sandbox runs inside containers, each a POSIX sh script passed to `sh -c`.

POSIX sh because the sandbox image may have no bash (COMMAND_WRAPPER runs the command itself in
bash when there is one). COMMAND_WRAPPER and REAPER run as the sandbox user in a chat's
container, around and after each command; OOM_COUNTER reads the container's cgroup after a
SIGKILL; MAINTENANCE runs as root in the short-lived tools container that makes and attaches a
chat's workspace image (lib/sandbox/workspace.py).
"""

# Each command runs (in bash when the image has it) as the leader of its own process group; the
# group is killed when it ends, and REAPER then kills whatever escaped the group (setsid, double
# forks), so a fork bomb or a forgotten background job cannot starve the chat's next command.
COMMAND_WRAPPER = """shell=sh; command -v bash >/dev/null 2>&1 && shell=bash
setsid "$shell" -c "$1" & pid=$!
wait "$pid"; rc=$?
for _ in 1 2 3 4 5 6 7 8 9 10; do kill -9 -"$pid" 2>/dev/null || break; sleep 0.05; done
exit "$rc"
"""
# Run after every command, as the sandbox user: stop then kill every process but PID 1 (the init
# that reaps zombies), the main process (PID 1's first child) and itself, until none is left.
# Shell builtins only in the loop, so it never counts its own children. Exit 3 (something is
# still alive) or 4 (no main process found): Ash replaces the container.
REAPER = """main=
read -r main _ < /proc/1/task/1/children
[ -n "$main" ] || exit 4
round=0
while [ "$round" -lt 30 ]; do
  left=
  for dir in /proc/[0-9]*; do
    p=${dir#/proc/}
    case "$p" in 1|"$main"|"$$") continue ;; esac
    stat=
    read -r stat < "$dir/stat" 2>/dev/null
    [ -n "$stat" ] || continue
    rest=${stat##*) }
    case "${rest%% *}" in Z|X) continue ;; esac
    left="$left $p"
  done
  [ -z "$left" ] && exit 0
  kill -STOP $left 2>/dev/null
  kill -KILL $left 2>/dev/null
  round=$((round + 1))
  sleep 0.02
done
exit 3
"""
# Maintenance, as root in TOOLS_IMAGE: `attach DIR SIZE` makes DIR/disk.img (a sparse ext2 image
# of SIZE bytes, root owned by the sandbox user, a legacy /old volume's files copied in) on first
# use and prints the loop device it is attached to, attaching it when it is not; `detach DIR`
# detaches it. A loop device is recognised by the file name it was attached with (DIR is unique
# per chat, and the sandbox cannot attach loop devices) and refused if its file was deleted.
MAINTENANCE = """action=$1 dir=$2 size=$3 img=$2/disk.img
fail() { echo "ASH-ERROR $*"; exit 1; }
[ -e /dev/loop-control ] || mknod -m 600 /dev/loop-control c 10 237 || fail "no /dev/loop-control"
node() { [ -e "$1" ] || mknod -m 600 "$1" b 7 "${1#/dev/loop}"; }
for sys in /sys/block/loop*; do [ -e "$sys" ] && node "/dev/${sys#/sys/block/}"; done
find_loops() {
  for sys in /sys/block/loop*; do
    [ -r "$sys/loop/backing_file" ] || continue
    dev=/dev/${sys#/sys/block/}
    name=$(losetup "$dev" 2>/dev/null) || continue
    [ "${name#*: * }" = "$1" ] || continue
    case "$(cat "$sys/loop/backing_file")" in *"(deleted)") continue ;; esac
    echo "$dev"
  done
}
attach() {
  tries=0
  while [ "$tries" -lt 50 ]; do
    dev=$(losetup -f) && node "$dev" && losetup "$dev" "$1" 2>/dev/null && { echo "$dev"; return 0; }
    tries=$((tries + 1)); sleep 0.1
  done
  return 1
}
if [ "$action" = detach ]; then
  for dev in $(find_loops "$img"); do losetup -d "$dev" || fail "cannot detach $dev"; done
  echo "ASH-DETACHED"; exit 0
fi
if [ ! -f "$img" ]; then
  rm -f "$img.new"
  truncate -s "$size" "$img.new" || fail "cannot create the image"
  mke2fs -F -m 0 "$img.new" >/dev/null 2>&1 || fail "mke2fs failed"
  dev=$(attach "$img.new") || fail "no free loop device"
  mkdir -p /tmp/ws && mount -t ext4 "$dev" /tmp/ws || { losetup -d "$dev"; fail "cannot mount the new image"; }
  rmdir /tmp/ws/lost+found
  copied=yes
  if [ -d /old ]; then cp -a /old/. /tmp/ws/ || copied=no; fi
  chown 1000:1000 /tmp/ws && chmod 700 /tmp/ws
  umount /tmp/ws; losetup -d "$dev"
  [ "$copied" = yes ] || fail "the old workspace does not fit in the workspace limit"
  mv "$img.new" "$img" || fail "cannot rename the image"
fi
dev=$(find_loops "$img" | head -n 1)
[ -n "$dev" ] || dev=$(attach "$img") || fail "no free loop device"
echo "ASH-LOOP $dev"
"""
# cgroup v1 and v2 both count OOM kills ("oom_kill N"); the container sees its own cgroup.
OOM_COUNTER = "cat /sys/fs/cgroup/memory/memory.oom_control /sys/fs/cgroup/memory.events 2>/dev/null"
