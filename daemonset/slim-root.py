"""Take out of the image's root everything the agent does not run (the Containerfile's `root` stage).

Run once, as root, inside that stage (`python3 /tmp/slim-root.py`), after the node tools and
/opt/nodedns are in place; it deletes itself last. What goes (docs/image.md "What is left out"):

- the package manager: every file of apt, dpkg, debconf, perl and the archive keys (read from dpkg's
  own lists before dpkg goes), and their state under /var; and the tools to log in, manage users,
  disks and file systems (login, passwd, util-linux, e2fsprogs), with the system's zone files;
- documentation, manual pages, translations, headers, glibc's iconv modules (Python has its own
  codecs) and the zone files (the `tzdata` wheel serves `zoneinfo`); each package's copyright file stays;
- the parts of Python's standard library that test, develop or draw (test modules, IDLE, tkinter,
  lib2to3, ensurepip, dbm, curses, the static library) and their compiled halves;
- every shared library in the system library directory that no program, Python extension or plugin
  left in the root loads (`ldd` of each of them), except those glibc itself opens by name.

Uses only Python's standard library and `ldd` (libc-bin): the base has nothing else.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

PACKAGE_MANAGER = ("apt", "libapt-pkg6.0", "dpkg", "debconf", "gpgv", "debian-archive-keyring")
# no one logs in, adds users, makes file systems or partitions disks in this container, and the
# zone files: the `tzdata` wheel has them too
ADMINISTRATION = ("login", "passwd", "util-linux", "util-linux-extra", "e2fsprogs", "bsdutils", "tzdata",
                  "libpam-modules", "libpam-modules-bin", "libpam-runtime", "libpam0g")
# single programs of packages that stay: the ARP daemon (the one user of Berkeley DB), OpenSSL's
# command line (the library stays), the locale compiler
PROGRAMS_UNUSED = ("/usr/sbin/arpd", "/usr/bin/openssl", "/usr/bin/c_rehash", "/usr/bin/localedef")
BLOAT = (
    "/var/lib/dpkg", "/var/lib/apt", "/var/cache", "/var/log", "/etc/apt", "/usr/share/perl", "/usr/share/perl5",
    "/usr/share/man", "/usr/share/info", "/usr/share/locale", "/usr/share/lintian", "/usr/share/bash-completion",
    "/usr/share/zsh", "/usr/share/debconf", "/usr/share/zoneinfo", "/usr/include", "/usr/local/include",
    "/usr/local/share/man",
)
STDLIB_UNUSED = ("test", "idlelib", "tkinter", "turtledemo", "turtle.py", "lib2to3", "ensurepip", "pydoc_data",
                 "dbm", "curses", "distutils", "__phello__")
DYNLOAD_UNUSED = ("_test", "_ctypes_test", "xxlimited", "_xxtestfuzz", "_dbm", "_gdbm", "_curses",
                  "audioop", "ossaudiodev", "nis", "_tkinter")
# opened by glibc by name, never linked: the unwinder pthread_cancel needs, the NSS modules
GLIBC_OPENS = ("libgcc_s.so", "libnss_", "ld-linux")


def drop(path: Path) -> int:
    """Remove a file, a symlink or a tree; the bytes it held."""
    if path.is_symlink() or path.is_file():
        size = path.lstat().st_size
        path.unlink()
        return size
    if path.is_dir():
        size = sum(p.lstat().st_size for p in path.rglob("*") if p.is_file() and not p.is_symlink())
        shutil.rmtree(path)
        return size
    return 0


def installed() -> list[str]:
    r = subprocess.run(["dpkg-query", "-W", "-f", "${Package}\\n"], capture_output=True, text=True, check=True)
    return r.stdout.split()


def packages() -> int:
    """The package manager, perl (which only it and debconf use) and the system administration tools."""
    names = [*PACKAGE_MANAGER, *ADMINISTRATION, *(p for p in installed() if "perl" in p)]
    files: list[Path] = []
    for pkg in names:
        r = subprocess.run(["dpkg-query", "-L", pkg], capture_output=True, text=True, check=False)
        files += [Path(line) for line in r.stdout.splitlines() if line.startswith("/")]
    # only files: a directory (and /bin, /lib: symlinks to directories) is shared with what stays
    freed = sum(drop(f) for f in files if not f.is_dir() and (f.is_file() or f.is_symlink()))
    return freed + sum(drop(Path(p)) for p in PROGRAMS_UNUSED)


def bloat() -> int:
    freed = sum(drop(Path(p)) for p in BLOAT)
    doc = Path("/usr/share/doc")
    if doc.is_dir():
        freed += sum(drop(f) for f in list(doc.rglob("*")) if f.name != "copyright" and not f.is_dir())
        for d in sorted(doc.rglob("*"), key=lambda p: len(p.parts), reverse=True):
            if d.is_dir() and not any(d.iterdir()):
                d.rmdir()
    for libdir in system_libdirs():
        freed += drop(libdir / "gconv")
    return freed


def stdlib() -> int:
    lib = Path(sysconfig.get_path("stdlib"))
    freed = sum(drop(lib / name) for name in STDLIB_UNUSED)
    freed += sum(drop(p) for p in lib.glob("config-3*"))
    freed += sum(drop(p) for p in lib.rglob("*.opt-[12].pyc"))
    cache = lib / "__pycache__"
    for name in ("turtle",):
        freed += sum(drop(p) for p in cache.glob(f"{name}.*.pyc"))
    dynload = lib / "lib-dynload"
    freed += sum(drop(p) for p in list(dynload.iterdir()) if p.name.startswith(DYNLOAD_UNUSED))
    return freed


def system_libdirs() -> list[Path]:
    multiarch = sysconfig.get_config_var("MULTIARCH") or "x86_64-linux-gnu"
    dirs = {Path(f"/usr/lib/{multiarch}").resolve(), Path(f"/lib/{multiarch}").resolve()}
    return [d for d in dirs if d.is_dir()]


def is_elf(path: Path) -> bool:
    try:
        with path.open("rb") as f:
            return f.read(4) == b"\x7fELF"
    except OSError:
        return False


def shared_libraries() -> set[Path]:
    return {p for d in system_libdirs() for p in d.iterdir() if ".so" in p.name and (p.is_file() or p.is_symlink())}


def programs() -> list[Path]:
    """Every ELF file outside the system library directory: programs, Python extensions, plugins."""
    libs = shared_libraries()
    return [p for top in ("/usr", "/opt", "/etc") for p in Path(top).rglob("*")
            if p.is_file() and not p.is_symlink() and p not in libs and is_elf(p)]


def ldd(path: Path) -> list[str]:
    """The lines of `ldd path`: `libx.so.1 => /usr/lib/.../libx.so.1 (0x...)` or `=> not found`."""
    return subprocess.run(["ldd", str(path)], capture_output=True, text=True, check=False).stdout.splitlines()


def orphan_libraries() -> int:
    needed: set[Path] = set()
    for program in programs():
        for line in ldd(program):
            if "=>" in line and "/" in line.split("=>", 1)[1]:
                needed.add(Path(line.split("=>", 1)[1].split()[0]).resolve())
    libs = shared_libraries()
    keep = {p for p in libs if p.resolve() in needed or p.name.startswith(GLIBC_OPENS)}
    return sum(drop(p) for p in sorted(libs - keep))


def unresolved() -> set[str]:
    """What a program would fail to load (a plugin of an optional library, as Debian ships tc's q_atm)."""
    return {f"{program}: {line.strip()}" for program in programs() for line in ldd(program) if "not found" in line}


def main() -> int:
    before = unresolved()
    steps = (("package manager, perl, administration tools", packages), ("documentation and locales", bloat),
             ("unused standard library", stdlib), ("unused shared libraries", orphan_libraries))
    for name, step in steps:
        print(f"slim-root: {name}: {step() / 1e6:.1f} MB", file=sys.stderr)
    os.unlink(__file__)
    broken = sorted(unresolved() - before)  # what slimming broke: must be nothing
    for line in broken:
        print(f"slim-root: a library is missing: {line}", file=sys.stderr)
    return 1 if broken else 0


if __name__ == "__main__":
    sys.exit(main())
