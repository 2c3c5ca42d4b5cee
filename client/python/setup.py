"""Builds the package with the gRPC stubs of proto/daqiri/v1/control.proto generated in place,
and the PTX of the mapped ring's relay step (cuda/src/mapped_rx_relay_kernel.cu) where nvcc is
found ($DAQIRI_NVCC, then nvcc on PATH, then /usr/local/cuda; $DAQIRI_NVCC empty: none).

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


# The relay kernel's PTX: the lowest architecture the C++ build targets; newer GPUs JIT it.
RELAY_KERNEL = "src/mapped_rx_relay_kernel.cu"
RELAY_ARCH = "compute_80"


def find_nvcc():
    if "DAQIRI_NVCC" in os.environ:
        return os.environ["DAQIRI_NVCC"] or None
    return shutil.which("nvcc") or next(
        (p for p in ["/usr/local/cuda/bin/nvcc"] if os.access(p, os.X_OK)), None)


def generate_relay_ptx(out_dir):
    nvcc = find_nvcc()
    cuda_dir = Path(os.environ.get("DAQIRI_CUDA_DIR", HERE.parent.parent / "cuda"))
    include_dir = Path(os.environ.get("DAQIRI_CLIENT_INCLUDE_DIR", HERE.parent.parent / "client" / "include"))
    if nvcc is None or not (cuda_dir / RELAY_KERNEL).is_file():
        print("daqiri: no nvcc or no cuda/ sources: the package has no mapped-ring relay")
        return
    subprocess.run([nvcc, "-ptx", f"-arch={RELAY_ARCH}", "-std=c++20", f"-I{cuda_dir / 'include'}",
                    f"-I{cuda_dir / 'src'}", f"-I{include_dir}", str(cuda_dir / RELAY_KERNEL),
                    "-o", str(Path(out_dir) / "daqiri" / "mapped_relay.ptx")], check=True)


class BuildWithStubs(build_py):
    def run(self):
        super().run()
        generate(self.build_lib)
        generate_relay_ptx(self.build_lib)


setup(cmdclass={"build_py": BuildWithStubs})
