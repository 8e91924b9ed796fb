"""The CPU (numpy) backend: one generated Python function per schedule and shapes.

* `backend`: `CPUBackend` and `CPUExecutable`;
* `codegen`: the generated function, line by line;
* `records`: the lines and expressions it is made of;
* `lowering`: the one resolver of how an op runs here besides
  its numpy kernel (a numpy form at exact shapes, a compiled kernel, a whole-step
  emitter), from one table of op families; an elementwise op's are rendered from its
  scalar expression;
* `specialize`: numpy forms of some ops at exact shapes;
* `jit`: the compiled path (Numba);
* `buffers`: writing results into dying inputs and scratch
  slots (``ASGRAD_CPU_REUSE``);
* `blas`: BLAS threads for small products
  (``ASGRAD_SERIAL_GEMM_FLOPS``).

What the generator may assume about an op's kernel is declared on the op
([`OpDef`][asgrad.tensor.OpDef]), and an elementwise op's compiled code is
rendered from its expression, so adding an op never needs to edit this package.
"""

from asgrad.tensor.cpu.backend import CPUBackend, CPUExecutable

__all__ = ["CPUBackend", "CPUExecutable"]
