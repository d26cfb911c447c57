"""The one thing pyproject.toml cannot say: the optional C hit path (nodedns/_hitpath.c).

`optional=True`: without a C compiler the build still succeeds and nodedns answers from the pure
Python hit path (nodedns/server.py); `nodedns serve` logs which one it uses.
"""

from setuptools import Extension, setup

setup(ext_modules=[Extension("nodedns._hitpath", ["nodedns/_hitpath.c"], optional=True,
                             extra_compile_args=["-O2", "-Wall", "-Wextra", "-Werror=implicit-function-declaration"])])
