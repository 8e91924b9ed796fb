"""The CPU (numpy) backend: one generated Python function per schedule and shapes.

* `backend`: `CPUBackend` and `CPUExecutable`;
* `codegen`: the generated function, line by line;
* `records`: the lines and expressions it is made of;
* `specialize`: numpy forms of some ops at exact shapes;
* `buffers`: writing results into dying inputs and scratch
  slots (``ASGRAD_CPU_REUSE``);
* `blas`: BLAS threads for small products
  (``ASGRAD_SERIAL_GEMM_FLOPS``).

What the generator may assume about an op's kernel is declared on the op
([`OpDef`][asgrad.tensor.OpDef]), so adding an op never edits this package.
"""

from asgrad.tensor.cpu.backend import CPUBackend, CPUExecutable

__all__ = ["CPUBackend", "CPUExecutable"]
