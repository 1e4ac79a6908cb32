// bool_narrow: device bools of 4 bytes (src) to host bools of 1 byte (dst, packed
// 4 to a word), for `elements` elements; one invocation writes one word, so no
// two invocations write the same word.
#version 450
layout(local_size_x = 64) in;
layout(std430, set = 0, binding = 0) writeonly buffer Dst { uint dst[]; };
layout(std430, set = 0, binding = 1) readonly buffer Src { uint src[]; };
layout(push_constant) uniform Params { uint words; uint elements; } params;

void main() {
  const uint stride = gl_NumWorkGroups.x * gl_WorkGroupSize.x;
  for (uint w = gl_GlobalInvocationID.x; w < params.words; w += stride) {
    uint packed_bools = 0u;
    for (uint k = 0u; k < 4u; ++k) {
      const uint e = w * 4u + k;
      if (e < params.elements && src[e] != 0u) packed_bools |= 1u << (k * 8u);
    }
    dst[w] = packed_bools;
  }
}
