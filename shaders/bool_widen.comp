// bool_widen: host bools of 1 byte (src, packed 4 to a word) to device bools of
// 4 bytes (dst), 0 or 1, for count elements.
#version 450
layout(local_size_x = 64) in;
layout(std430, set = 0, binding = 0) writeonly buffer Dst { uint dst[]; };
layout(std430, set = 0, binding = 1) readonly buffer Src { uint src[]; };
layout(push_constant) uniform Params { uint count; uint unused; } params;

void main() {
  const uint stride = gl_NumWorkGroups.x * gl_WorkGroupSize.x;
  for (uint i = gl_GlobalInvocationID.x; i < params.count; i += stride) {
    const uint byte_value = (src[i >> 2] >> ((i & 3u) * 8u)) & 0xffu;
    dst[i] = byte_value != 0u ? 1u : 0u;
  }
}
