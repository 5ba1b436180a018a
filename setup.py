"""Build of the compiled mask kernels (enforcer/_kernels.pyx); everything else is in pyproject.toml."""

from Cython.Build import cythonize
from setuptools import Extension, setup

setup(
    ext_modules=cythonize(
        [Extension("enforcer._kernels", ["enforcer/_kernels.pyx"], extra_compile_args=["-O3"])],
        compiler_directives={"language_level": "3"},
    )
)
