"""Generates the gRPC stubs as part of every build, so a fresh clone never needs manual codegen."""

from setuptools import setup
from setuptools.command.build_py import build_py


class BuildWithStubs(build_py):
    def run(self) -> None:
        from proto.codegen import generate

        generate()
        super().run()


setup(cmdclass={"build_py": BuildWithStubs})
