"""Builds the package with the gRPC stubs of proto/daqiri/v1/control.proto generated in place.

Debian's grpc_tools bundles a protoc too old for proto3 `optional`, so the stubs come from the
system protoc and /usr/bin/grpc_python_plugin (override with $PROTOC, $GRPC_PYTHON_PLUGIN and
$DAQIRI_PROTO_DIR).
"""
import os
import shutil
import subprocess
from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py

HERE = Path(__file__).resolve().parent
PROTO = "daqiri/v1/control.proto"


def find_tool(env, names):
    if os.environ.get(env):
        return os.environ[env]
    for name in names:
        path = shutil.which(name) or (name if os.path.isabs(name) and os.access(name, os.X_OK) else None)
        if path:
            return path
    raise SystemExit(f"daqiri: {names[0]} not found (set ${env}); Debian: apt install "
                     "protobuf-compiler protobuf-compiler-grpc")


def generate(out_dir):
    proto_dir = Path(os.environ.get("DAQIRI_PROTO_DIR", HERE.parent.parent / "proto"))
    if not (proto_dir / PROTO).is_file():
        raise SystemExit(f"daqiri: {proto_dir / PROTO} not found (set $DAQIRI_PROTO_DIR)")
    protoc = find_tool("PROTOC", ["protoc"])
    plugin = find_tool("GRPC_PYTHON_PLUGIN", ["grpc_python_plugin", "/usr/bin/grpc_python_plugin"])
    os.makedirs(out_dir, exist_ok=True)
    subprocess.run([protoc, f"-I{proto_dir}", f"--python_out={out_dir}", f"--pyi_out={out_dir}",
                    f"--grpc_out={out_dir}", f"--plugin=protoc-gen-grpc={plugin}",
                    str(proto_dir / PROTO)], check=True)


class BuildWithStubs(build_py):
    def run(self):
        super().run()
        generate(self.build_lib)


setup(cmdclass={"build_py": BuildWithStubs})
