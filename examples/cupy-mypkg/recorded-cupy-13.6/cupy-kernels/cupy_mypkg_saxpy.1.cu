#include <cupy/complex.cuh>
#include <cupy/carray.cuh>
#include <cupy/atomics.cuh>
#include <cupy/math_constants.h>

    typedef double T;

    
    extern "C" __global__ void cupy_mypkg_saxpy(const double a, const CArray<double, 1, 1, 1> _raw_x, const CArray<double, 1, 1, 1> _raw_y, CArray<double, 1, 1, 1> _raw_z, CIndexer<1, 1> _ind) {
      ;
      #pragma unroll 1
      CUPY_FOR(i, _ind.size()) {
        _ind.set(i);
        const T &x = _raw_x[_ind.get()];
const T &y = _raw_y[_ind.get()];
T &z = _raw_z[_ind.get()];
z = a * x + y;
      }
      ;
    }
    