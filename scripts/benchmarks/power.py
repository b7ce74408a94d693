"""model.gelu's cube: float32 `x**3` against `x * x * x`, at GELU's sizes, by the sign of x.

    python -m scripts.benchmarks.power

NumPy has no shortcut for the power 3: `x**3` runs its general float32 power routine (SVML's
vectorised `pow` on AVX-512 machines, libm's `powf` elsewhere), whose time depends on the values
(a negative base took a much slower path here), while `x * x * x` is two vectorised
multiplications. So the ratio is printed for standard normal
values (half of them negative, like GELU's inputs) and for positive ones. Best of 7 repeats.
"""

import timeit

import numpy as np

SHAPES = [(768,), (3072,), (16, 3072), (128, 3072), (512, 3072), (1024, 3072)]


def best_time(f, size: int) -> float:
    """Seconds per call of f, the best of 7 repeats of about 2 million elements' work."""
    number = max(1, 2_000_000 // size)
    return min(timeit.repeat(f, number=number, repeat=7)) / number


def main() -> None:
    rng = np.random.default_rng(0)
    print(f"NumPy {np.__version__}; microseconds per call, x**3 / x*x*x")
    for values in ("normal", "positive"):
        for shape in SHAPES:
            x = rng.normal(size=shape).astype(np.float32)
            if values == "positive":
                x = np.abs(x)
            power = best_time(lambda x=x: x**3, x.size)
            multiply = best_time(lambda x=x: x * x * x, x.size)
            print(f"{values:8} {str(shape):12} x**3 {power * 1e6:10.1f}  x*x*x "
                  f"{multiply * 1e6:8.1f}  ratio {power / multiply:6.1f}")


if __name__ == "__main__":
    main()
