#include <cupy/complex.cuh>
#include <cupy/carray.cuh>
#include <cupy/atomics.cuh>
#include <cupy/math_constants.h>

    typedef double in0_type;
typedef double out0_type;

    
    extern "C" __global__ void cupy_sqrt__float64_float64(const CArray<double, 0, 1, 1> _raw_in0, CArray<double, 0, 1, 1> _raw_out0, CIndexer<0, 1> _ind) {
      ;
      #pragma unroll 1
      CUPY_FOR(i, _ind.size()) {
        _ind.set(i);
        const in0_type in0(_raw_in0[_ind.get()]);
out0_type out0;
out0 = sqrt(in0)
;
_raw_out0[_ind.get()] = out0;;
      }
      ;
    }
    