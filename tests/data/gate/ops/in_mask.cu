struct State { const unsigned char* mask; };
extern "C" __device__ void in_mask(void* state, void* i, void* result) {
    const State* s = static_cast<const State*>(state);
    *static_cast<bool*>(result) = s->mask[*static_cast<int*>(i)] != 0;
}
