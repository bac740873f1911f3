#!/usr/bin/python3
# SPDX-License-Identifier: BSD-2-Clause
"""Run a command inside the sandbox a systemd unit file asks for, where no
systemd runs (the Soft-RoCE lab boots a busybox init): the lab then shows
that the server works under its unit's settings.

    unit_sandbox.py UNIT -- COMMAND [ARG...]

From UNIT it applies, as systemd would:
  - SystemCallFilter= (allow lists and ~deny lists, @groups expanded by
    systemd-analyze), with SystemCallErrorNumber= for the rest;
  - MemoryDenyWriteExecute= (no mapping writable and executable, no
    mprotect to executable), as systemd's own seccomp rules;
  - LimitMEMLOCK=, LimitNOFILE=, UMask=, NoNewPrivileges=;
  - DynamicUser= (a user and group of no account, no supplementary groups)
    with CapabilityBoundingSet= and AmbientCapabilities=;
  - ProtectProc=invisible and ProcSubset=pid (a /proc of its own);
  - ProtectSystem=strict and PrivateTmp= (a read-only tree, a tmpfs /tmp),
    in a mount namespace of its own.
Not applied: the device ACL (the caller checks which devices the process
holds open), RestrictAddressFamilies= and the namespaces/realtime/personality
restrictions, which the command's success does not depend on.
"""
import ctypes
import errno
import os
import resource
import shutil
import subprocess
import sys

import seccomp

CLONE_NEWNS = 0x00020000
MS_REC, MS_PRIVATE, MS_BIND, MS_REMOUNT, MS_RDONLY = 0x4000, 1 << 18, 0x1000, 0x20, 1
PR_CAPBSET_DROP, PR_SET_NO_NEW_PRIVS, PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL = 24, 38, 47, 4
PROT_WRITE, PROT_EXEC = 2, 4
NOBODY = 65534

libc = ctypes.CDLL(None, use_errno=True)


def die(msg):
    print(f"unit_sandbox: {msg}", file=sys.stderr)
    sys.exit(125)


def check(rc, what):
    if rc != 0:
        die(f"{what}: {os.strerror(ctypes.get_errno())}")


def parse(path):
    """The [Service] settings, each a list of values in order."""
    out, section = {}, None
    for line in open(path):
        line = line.strip()
        if not line or line[0] in "#;":
            continue
        if line.startswith("["):
            section = line
            continue
        if section == "[Service]" and "=" in line:
            k, v = line.split("=", 1)
            out.setdefault(k.strip(), []).append(v.strip())
    return out


def expand(name, seen=None):
    """A syscall name, or an @group expanded (systemd-analyze syscall-filter)."""
    if not name.startswith("@"):
        return {name}
    seen = seen if seen is not None else set()
    if name in seen:
        return set()
    seen.add(name)
    text = subprocess.run(["systemd-analyze", "syscall-filter", name], check=True,
                          capture_output=True, text=True).stdout
    names = set()
    for line in text.splitlines()[1:]:
        w = line.strip()
        if w and not w.startswith("#"):
            names |= expand(w, seen)
    return names


def syscall_filter(settings):
    allow, deny = None, set()
    for v in settings.get("SystemCallFilter", []):
        neg = v.startswith("~")
        names = set()
        for w in v.lstrip("~").split():
            names |= expand(w)
        if neg:
            deny |= names
        else:
            allow = (allow or set()) | names
    err = settings.get("SystemCallErrorNumber", ["EPERM"])[-1]
    return allow, deny, getattr(errno, err)


def build_filter(settings):
    allow, deny, err = syscall_filter(settings)
    mdwe = settings.get("MemoryDenyWriteExecute", ["no"])[-1] == "yes"
    f = seccomp.SyscallFilter(defaction=seccomp.ERRNO(err) if allow is not None else seccomp.ALLOW)
    guarded = {"mmap", "mprotect", "pkey_mprotect"} if mdwe else set()
    for name in sorted((allow if allow is not None else set()) - deny - guarded):
        try:
            f.add_rule(seccomp.ALLOW, name)
        except (ValueError, RuntimeError):
            pass  # not a system call of this architecture
    if allow is None:
        for name in sorted(deny):
            try:
                f.add_rule(seccomp.ERRNO(err), name)
            except (ValueError, RuntimeError):
                pass
    if mdwe:
        wx = PROT_WRITE | PROT_EXEC
        # mmap: anything but writable and executable at once; mprotect and
        # pkey_mprotect: never to executable.
        # (With an allow list, what is not allowed gets its error number.)
        for value in (0, PROT_WRITE, PROT_EXEC):
            f.add_rule(seccomp.ALLOW, "mmap", seccomp.Arg(2, seccomp.MASKED_EQ, wx, value))
        for name in ("mprotect", "pkey_mprotect"):
            f.add_rule(seccomp.ALLOW, name, seccomp.Arg(2, seccomp.MASKED_EQ, PROT_EXEC, 0))
        if allow is None:
            f.add_rule(seccomp.ERRNO(errno.EPERM), "mmap",
                       seccomp.Arg(2, seccomp.MASKED_EQ, wx, wx))
            for name in ("mprotect", "pkey_mprotect"):
                f.add_rule(seccomp.ERRNO(errno.EPERM), name,
                           seccomp.Arg(2, seccomp.MASKED_EQ, PROT_EXEC, PROT_EXEC))
    elif allow is not None:
        for name in ("mmap", "mprotect", "pkey_mprotect"):
            if name in allow - deny:
                f.add_rule(seccomp.ALLOW, name)
    return f


def limit(value):
    return resource.RLIM_INFINITY if value == "infinity" else int(value)


def tree_under_tmp(cmd):
    """The top directory under /tmp that holds the command's executable
    (a clone and its build under /tmp), or None. A packaged server lies
    in /usr/bin; a test's build tree is its stand-in, so it stays visible
    in the private /tmp, as BindReadOnlyPaths= would keep it."""
    exe = shutil.which(cmd[0])
    if not exe:
        return None
    parts = os.path.realpath(exe).split(os.sep)
    if len(parts) > 3 and parts[1] == "tmp":
        return os.sep + os.path.join(parts[1], parts[2])
    return None


def mounts(settings, cmd):
    check(libc.unshare(CLONE_NEWNS), "unshare(CLONE_NEWNS)")
    check(libc.mount(b"none", b"/", None, MS_REC | MS_PRIVATE, None), "make / private")
    if settings.get("PrivateTmp", ["no"])[-1] == "yes":
        keep = tree_under_tmp(cmd)
        held = os.open(keep, os.O_PATH | os.O_DIRECTORY) if keep else -1
        check(libc.mount(b"tmpfs", b"/tmp", b"tmpfs", 0, b"mode=1777"), "tmpfs on /tmp")
        if keep:
            os.mkdir(keep, 0o755)
            check(libc.mount(f"/proc/self/fd/{held}".encode(), keep.encode(), None, MS_BIND | MS_REC,
                             None), f"{keep} kept in the private /tmp")
            os.close(held)
    proc = []
    if settings.get("ProtectProc", [""])[-1] == "invisible":
        proc.append("hidepid=invisible")
    if settings.get("ProcSubset", [""])[-1] == "pid":
        proc.append("subset=pid")
    if proc:
        check(libc.mount(b"proc", b"/proc", b"proc", 0, ",".join(proc).encode()), "proc")
    if settings.get("ProtectSystem", ["no"])[-1] == "strict":
        # The whole tree read-only, but the API file systems and /tmp.
        for m in ("/",):
            libc.mount(m.encode(), m.encode(), None, MS_BIND | MS_REC, None)
            check(libc.mount(b"none", m.encode(), None, MS_BIND | MS_REMOUNT | MS_RDONLY, None),
                  "read-only /")


def main():
    if len(sys.argv) < 4 or sys.argv[2] != "--":
        die("usage: unit_sandbox.py UNIT -- COMMAND [ARG...]")
    settings = parse(sys.argv[1])
    cmd = sys.argv[3:]
    f = build_filter(settings)
    for key, res in (("LimitMEMLOCK", resource.RLIMIT_MEMLOCK),
                     ("LimitNOFILE", resource.RLIMIT_NOFILE)):
        if key in settings:
            v = limit(settings[key][-1])
            try:
                resource.setrlimit(res, (v, v))
            except (ValueError, OSError) as e:
                # A container that may not raise it (not the lab's VM).
                print(f"unit_sandbox: {key}={v} not applied here: {e}", file=sys.stderr)
    os.umask(int(settings.get("UMask", ["0022"])[-1], 8))
    mounts(settings, cmd)
    if settings.get("DynamicUser", ["no"])[-1] == "yes":
        keep = set(settings.get("CapabilityBoundingSet", [""])[-1].split())
        if keep:
            die("this sandbox drops every capability; the unit keeps " + " ".join(keep))
        for cap in range(64):
            libc.prctl(PR_CAPBSET_DROP, cap, 0, 0, 0)
        libc.prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0)
        os.setgroups([])
        os.setresgid(NOBODY, NOBODY, NOBODY)
        os.setresuid(NOBODY, NOBODY, NOBODY)
    if settings.get("NoNewPrivileges", ["no"])[-1] == "yes":
        check(libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0), "no_new_privs")
    f.load()
    os.execvp(cmd[0], cmd)


if __name__ == "__main__":
    try:
        main()
    except Exception as e:  # the sandbox itself failed: not the command
        die(f"{type(e).__name__}: {e}")
