"""Generates the gRPC stubs as part of every build, so a fresh clone never needs manual codegen."""

import runpy
from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py

HERE = Path(__file__).resolve().parent


class BuildWithStubs(build_py):
    def run(self) -> None:
        # Loaded by path: the source tree is not importable inside pip's isolated build.
        runpy.run_path(str(HERE / "src" / "semsearch" / "proto" / "codegen.py"))["generate"]()
        super().run()


setup(cmdclass={"build_py": BuildWithStubs})
