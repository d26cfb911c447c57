"""The one thing pyproject.toml cannot say: the optional C extensions, the hit path (nodedns/serve/_hitpath.c)
and the endpoint columns of a watched EndpointSlice (nodedns/cluster/_slim.c).

`optional=True`: without a C compiler the build still succeeds and nodedns answers from the pure
Python hit path (nodedns/serve/hitpath.py), and slims every slice in Python (nodedns/cluster/objects/endpointslice.py);
`nodedns serve` logs which hit path it uses.

Hardened as distributions build network daemons: stack canaries in every function with a local
array or an address-taken local (`-fstack-protector-strong`, failures end in `__stack_chk_fail`),
size-checked libc calls where the compiler knows the buffer's size (`-D_FORTIFY_SOURCE=2`, which
needs the optimizer: `-O2`), and a read-only GOT resolved at load time (`-Wl,-z,relro,-z,now`:
GNU_RELRO and BIND_NOW). tests/e2e/test_hitpath_c.py checks the built `.so` with readelf.
"""

from setuptools import Extension, setup

HARDENING_CFLAGS = ["-fstack-protector-strong", "-U_FORTIFY_SOURCE", "-D_FORTIFY_SOURCE=2"]
HARDENING_LDFLAGS = ["-Wl,-z,relro,-z,now"]

CFLAGS = ["-O2", "-Wall", "-Wextra", "-Werror=implicit-function-declaration", *HARDENING_CFLAGS]

setup(ext_modules=[
    Extension("nodedns.serve._hitpath", ["nodedns/serve/_hitpath.c"], optional=True,
              extra_compile_args=CFLAGS, extra_link_args=HARDENING_LDFLAGS),
    Extension("nodedns.cluster._slim", ["nodedns/cluster/_slim.c"], optional=True,
              extra_compile_args=CFLAGS, extra_link_args=HARDENING_LDFLAGS),
])
