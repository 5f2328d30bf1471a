// The PTX layer and the recurrence kernel's fragment helpers, each checked against a CPU matmul
// on random data: every register layout the kernels rely on (mma C -> A reuse, ldmatrix and
// ldmatrix.trans from the swizzled chunk record, ldmatrix.trans of the padded value tile,
// stmatrix.trans of the output tile, the bf16 hi/lo split). One warp per test kernel. The PTX layer's
// synchronisation (test_ptx_sync.cu) and arithmetic replacements (test_ptx_math.cu) have their own files.
#include <cuda_bf16.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "src/kernels/sm90/record_fragments.cuh"
#include "tests/gpu/gpu_harness.h"

namespace kda::test {
namespace {

using sm90::ChunkRecord;
using ptx::Frag;

// ---- device probes ------------------------------------------------------------------------------

// Elements of a [16][128] operand's buffer: the wide layout, or two column panels of kPanel bytes.
template <uint32_t kPanel>
constexpr int kOperandElems = kPanel == 0 ? 16 * 128 : static_cast<int>(kPanel);

// X[16][16] = S[16][128] · Wd[16][128]ᵀ with S from C fragments (split hi/lo) and Wd from the record
// (kPanel = 0: the wide layout; else the record's panels, Wd as rows 0..15 of [Wd; Qp]).
template <uint32_t kPanel>
__global__ void probe_state_times_wide(const float* S, const uint16_t* wd_swizzled, float* X, int split) {
  __shared__ __align__(128) uint16_t wd[kOperandElems<kPanel>];
  const int lane = threadIdx.x;
  for (int i = lane; i < kOperandElems<kPanel>; i += 32) wd[i] = wd_swizzled[i];
  __syncwarp();
  float s[16][4];
  for (int nt = 0; nt < 16; ++nt)
    for (int r = 0; r < 4; ++r) s[nt][r] = S[Frag::c_row(lane, r) * 128 + nt * 8 + Frag::c_col(lane, r)];
  float x[2][4] = {};
  for (int ks = 0; ks < 8; ++ks) {
    uint32_t b[4];
    sm90::frag::load_b_nmajor<kPanel>(b, reinterpret_cast<const unsigned char*>(wd), ks, lane);
    const uint32_t b0[2] = {b[0], b[1]}, b1[2] = {b[2], b[3]};
    uint32_t hi[4], lo[4];
    ptx::c_pair_to_a_split(s[2 * ks], s[2 * ks + 1], hi, lo);
    if (!split) ptx::c_pair_to_a(s[2 * ks], s[2 * ks + 1], hi);
    ptx::mma_m16n8k16_bf16_f32(x[0], hi, b0);
    ptx::mma_m16n8k16_bf16_f32(x[1], hi, b1);
    if (split) {
      ptx::mma_m16n8k16_bf16_f32(x[0], lo, b0);
      ptx::mma_m16n8k16_bf16_f32(x[1], lo, b1);
    }
  }
  for (int nt = 0; nt < 2; ++nt)
    for (int r = 0; r < 4; ++r) X[Frag::c_row(lane, r) * 16 + nt * 8 + Frag::c_col(lane, r)] = x[nt][r];
}

// Y[16][128] = U[16][16] · Kr[16][128] with U from C fragments and Kr from the record (k-major; kPanel
// as above).
template <uint32_t kPanel>
__global__ void probe_small_times_kr(const float* U, const uint16_t* kr_swizzled, float* Y) {
  __shared__ __align__(128) uint16_t kr[kOperandElems<kPanel>];
  const int lane = threadIdx.x;
  for (int i = lane; i < kOperandElems<kPanel>; i += 32) kr[i] = kr_swizzled[i];
  __syncwarp();
  float u[2][4];
  for (int nt = 0; nt < 2; ++nt)
    for (int r = 0; r < 4; ++r) u[nt][r] = U[Frag::c_row(lane, r) * 16 + nt * 8 + Frag::c_col(lane, r)];
  uint32_t a[4];
  ptx::c_pair_to_a(u[0], u[1], a);
  for (int p = 0; p < 8; ++p) {
    uint32_t b[4];
    sm90::frag::load_b_kmajor<kPanel>(b, reinterpret_cast<const unsigned char*>(kr), p, lane);
    for (int h = 0; h < 2; ++h) {
      float y[4] = {};
      const uint32_t bb[2] = {b[2 * h], b[2 * h + 1]};
      ptx::mma_m16n8k16_bf16_f32(y, a, bb);
      for (int r = 0; r < 4; ++r) Y[Frag::c_row(lane, r) * 128 + (2 * p + h) * 8 + Frag::c_col(lane, r)] = y[r];
    }
  }
}

// Z[16 v][16 i] = Σ_j V[j][v] · T[i][j]: V from a padded [token][v] tile (ldmatrix.trans, A operand),
// T from a swizzled 16x16 record half; then the result stored as [i][v] through stmatrix.trans.
__global__ void probe_values_times_small(const uint16_t* V /*[16][16]*/, const uint16_t* t_swizzled, float* Z,
                                         uint16_t* Zt /*[16 i][16 v] bf16*/) {
  constexpr int kRowBytes = 16 * 2 + 16;
  __shared__ __align__(128) unsigned char vt[16 * kRowBytes];
  __shared__ __align__(128) uint16_t t[256];
  __shared__ __align__(128) unsigned char out_tile[512];
  const int lane = threadIdx.x;
  for (int i = lane; i < 256; i += 32) {
    reinterpret_cast<uint16_t*>(vt + (i / 16) * kRowBytes)[i % 16] = V[i];
    t[i] = t_swizzled[i];
  }
  __syncwarp();
  uint32_t av[4];
  {
    const int m = lane >> 3, r = lane & 7;
    ptx::ldmatrix_x4_trans(av, vt + (r + 8 * (m >> 1)) * kRowBytes + 8 * (m & 1) * 2);
  }
  uint32_t bt[4];
  sm90::frag::load_b_small(bt, reinterpret_cast<unsigned char*>(t), lane);
  float z[2][4] = {};
  for (int nt = 0; nt < 2; ++nt) {
    const uint32_t b[2] = {bt[2 * nt], bt[2 * nt + 1]};
    ptx::mma_m16n8k16_bf16_f32(z[nt], av, b);
    for (int r = 0; r < 4; ++r) Z[Frag::c_row(lane, r) * 16 + nt * 8 + Frag::c_col(lane, r)] = z[nt][r];
  }
  const uint32_t r4[4] = {ptx::pack_bf16x2(z[0][0], z[0][1]), ptx::pack_bf16x2(z[0][2], z[0][3]),
                          ptx::pack_bf16x2(z[1][0], z[1][1]), ptx::pack_bf16x2(z[1][2], z[1][3])};
  const int m = lane >> 3, rr = lane & 7;
  ptx::stmatrix_x4_trans(out_tile + ChunkRecord::small_chunk_byte(rr + 8 * (m >> 1), m & 1), r4);
  __syncwarp();
  for (int i = lane; i < 256; i += 32) {
    const int row = i / 16, col = i % 16;
    Zt[i] = reinterpret_cast<const uint16_t*>(out_tile)[ChunkRecord::small_index(row, col)];
  }
}

// Y[16][16] = X[16][128] · W[16][128]ᵀ with X as A from a wide tile (m-major) and W as B (n-major):
// the preparation kernel's Kd·Kiᵀ (Y2: the same per n-tile, load_b_nmajor_ntile). Z[16][128] = F[16][16] · W with F a float tile split hi/lo
// (A) and W as B (k-major): the preparation kernel's Tb·Kd, stored through store_c_wide_bf16.
__global__ void probe_prep_products(const uint16_t* x_sw, const uint16_t* w_sw, const float* F, float* Y,
                                    uint16_t* Z_sw, float* Y2) {
  __shared__ __align__(128) uint16_t x[16 * 128], w[16 * 128];
  __shared__ __align__(16) float f[16 * 24];
  const int lane = threadIdx.x;
  for (int i = lane; i < 16 * 128; i += 32) {
    x[i] = x_sw[i];
    w[i] = w_sw[i];
  }
  for (int i = lane; i < 256; i += 32) f[(i / 16) * 24 + i % 16] = F[i];
  __syncwarp();
  float y[2][4] = {};
  for (int ks = 0; ks < 8; ++ks) {
    uint32_t a[4], b[4];
    sm90::frag::load_a_mmajor(a, reinterpret_cast<const unsigned char*>(x), ks, lane);
    sm90::frag::load_b_nmajor(b, reinterpret_cast<const unsigned char*>(w), ks, lane);
    const uint32_t b0[2] = {b[0], b[1]}, b1[2] = {b[2], b[3]};
    ptx::mma_m16n8k16_bf16_f32(y[0], a, b0);
    ptx::mma_m16n8k16_bf16_f32(y[1], a, b1);
  }
  for (int nt = 0; nt < 2; ++nt)
    for (int r = 0; r < 4; ++r) Y[Frag::c_row(lane, r) * 16 + nt * 8 + Frag::c_col(lane, r)] = y[nt][r];
  // Y again, one n-tile at a time with W's fragments two k-steps per load (the preparation's phase 4).
  for (int nt = 0; nt < 2; ++nt) {
    float y2[4] = {};
    for (int kp = 0; kp < 4; ++kp) {
      uint32_t b[4];
      sm90::frag::load_b_nmajor_ntile(b, reinterpret_cast<const unsigned char*>(w), nt, kp, lane);
      for (int h = 0; h < 2; ++h) {
        uint32_t a[4];
        sm90::frag::load_a_mmajor(a, reinterpret_cast<const unsigned char*>(x), 2 * kp + h, lane);
        const uint32_t bb[2] = {b[2 * h], b[2 * h + 1]};
        ptx::mma_m16n8k16_bf16_f32(y2, a, bb);
      }
    }
    for (int r = 0; r < 4; ++r) Y2[Frag::c_row(lane, r) * 16 + nt * 8 + Frag::c_col(lane, r)] = y2[r];
  }
  uint32_t fh[4], fl[4];
  sm90::frag::load_a_f32_split(f, 24, false, lane, fh, fl);
  for (int p = 0; p < 8; ++p) {
    uint32_t b[4];
    sm90::frag::load_b_kmajor(b, reinterpret_cast<const unsigned char*>(w), p, lane);
    for (int h = 0; h < 2; ++h) {
      float z[4] = {};
      const uint32_t bb[2] = {b[2 * h], b[2 * h + 1]};
      ptx::mma_m16n8k16_bf16_f32(z, fl, bb);
      ptx::mma_m16n8k16_bf16_f32(z, fh, bb);
      sm90::frag::store_c_wide_bf16(Z_sw, z, 2 * p + h, lane);
    }
  }
}

// ---- host side ----------------------------------------------------------------------------------

uint16_t to_bf16(float x) {
  __nv_bfloat16 h = __float2bfloat16_rn(x);
  return *reinterpret_cast<uint16_t*>(&h);
}
float from_bf16(uint16_t b) {
  uint32_t u = static_cast<uint32_t>(b) << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

template <typename T>
struct Buf {
  T* d = nullptr;
  size_t n;
  explicit Buf(const std::vector<T>& h) : n(h.size()) {
    cudaMalloc(&d, n * sizeof(T));
    cudaMemcpy(d, h.data(), n * sizeof(T), cudaMemcpyHostToDevice);
  }
  explicit Buf(size_t count) : n(count) { cudaMalloc(&d, n * sizeof(T)); }
  std::vector<T> get() const {
    std::vector<T> h(n);
    cudaMemcpy(h.data(), d, n * sizeof(T), cudaMemcpyDeviceToHost);
    return h;
  }
  ~Buf() { cudaFree(d); }
};

double max_rel(const std::vector<float>& x, const std::vector<double>& ref) {
  double num = 0, den = 0;
  for (size_t i = 0; i < x.size(); ++i) {
    num = std::max(num, std::fabs(x[i] - ref[i]));
    den = std::max(den, std::fabs(ref[i]));
  }
  return num / den;
}

template <uint32_t kPanel>
void check_state_times_wide(const char* layout) {
  std::mt19937 rng(7);
  std::normal_distribution<float> nd;
  std::vector<float> S(16 * 128), wd(16 * 128);
  std::vector<uint16_t> wd_sw(kOperandElems<kPanel>, 0);
  for (auto& x : S) x = nd(rng);
  for (int i = 0; i < 16; ++i)
    for (int c = 0; c < 128; ++c) {
      const uint16_t b = to_bf16(nd(rng));
      wd[i * 128 + c] = from_bf16(b);
      wd_sw[ChunkRecord::element_index<kPanel>(i, c)] = b;
    }
  for (int split = 0; split < 2; ++split) {
    std::vector<double> ref(256, 0.0);
    for (int v = 0; v < 16; ++v)
      for (int i = 0; i < 16; ++i)
        for (int c = 0; c < 128; ++c) {
          const float s = S[v * 128 + c];
          const float hi = from_bf16(to_bf16(s));
          const double sop = split ? double(hi) + double(from_bf16(to_bf16(s - hi))) : double(hi);
          ref[v * 16 + i] += sop * wd[i * 128 + c];
        }
    Buf<float> dS(S), dX(256);
    Buf<uint16_t> dW(wd_sw);
    probe_state_times_wide<kPanel><<<1, 32>>>(dS.d, dW.d, dX.d, split);
    ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    EXPECT_LT(max_rel(dX.get(), ref), 1e-5) << layout << " split=" << split;
  }
}

// Both layouts: the preparation's wide tiles and the record's [Wd; Qp] panels (the mma.sync recurrence).
TEST(Ptx, StateTimesWideOperandSplitAndPlain) {
  KDA_SKIP_WITHOUT_SM90();
  check_state_times_wide<0>("wide");
  check_state_times_wide<ChunkRecord::kWqPanelBytes>("record panels");
}

template <uint32_t kPanel>
void check_small_times_kr(const char* layout) {
  std::mt19937 rng(8);
  std::normal_distribution<float> nd;
  std::vector<float> U(256), kr(16 * 128);
  std::vector<uint16_t> kr_sw(kOperandElems<kPanel>, 0);
  for (auto& x : U) x = nd(rng);
  for (int i = 0; i < 16; ++i)
    for (int c = 0; c < 128; ++c) {
      const uint16_t b = to_bf16(nd(rng));
      kr[i * 128 + c] = from_bf16(b);
      kr_sw[ChunkRecord::element_index<kPanel>(i, c)] = b;
    }
  std::vector<double> ref(16 * 128, 0.0);
  for (int v = 0; v < 16; ++v)
    for (int c = 0; c < 128; ++c)
      for (int i = 0; i < 16; ++i) ref[v * 128 + c] += double(from_bf16(to_bf16(U[v * 16 + i]))) * kr[i * 128 + c];
  Buf<float> dU(U), dY(16 * 128);
  Buf<uint16_t> dK(kr_sw);
  probe_small_times_kr<kPanel><<<1, 32>>>(dU.d, dK.d, dY.d);
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  EXPECT_LT(max_rel(dY.get(), ref), 1e-5) << layout;
}

// Both layouts: the preparation's wide tiles and the record's Kr panels (the mma.sync recurrence).
TEST(Ptx, SmallTimesKeyMajorRecordOperand) {
  KDA_SKIP_WITHOUT_SM90();
  check_small_times_kr<0>("wide");
  check_small_times_kr<ChunkRecord::kKrPanelBytes>("record panels");
}

TEST(Ptx, ValuesTransposedTimesSmallAndStmatrixTrans) {
  KDA_SKIP_WITHOUT_SM90();
  std::mt19937 rng(9);
  std::normal_distribution<float> nd;
  std::vector<uint16_t> V(256), t_sw(256);
  std::vector<float> Vf(256), T(256);
  for (int i = 0; i < 256; ++i) {
    V[i] = to_bf16(nd(rng));
    Vf[i] = from_bf16(V[i]);
  }
  for (int i = 0; i < 16; ++i)
    for (int j = 0; j < 16; ++j) {
      const uint16_t b = to_bf16(nd(rng));
      T[i * 16 + j] = from_bf16(b);
      t_sw[ChunkRecord::small_index(i, j)] = b;
    }
  std::vector<double> ref(256, 0.0);  // [v][i]
  for (int v = 0; v < 16; ++v)
    for (int i = 0; i < 16; ++i)
      for (int j = 0; j < 16; ++j) ref[v * 16 + i] += double(Vf[j * 16 + v]) * T[i * 16 + j];
  Buf<uint16_t> dV(V), dT(t_sw), dZt(256);
  Buf<float> dZ(256);
  probe_values_times_small<<<1, 32>>>(dV.d, dT.d, dZ.d, dZt.d);
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  const std::vector<float> Z = dZ.get();
  EXPECT_LT(max_rel(Z, ref), 1e-5);
  const std::vector<uint16_t> Zt = dZt.get();  // [i][v] = bf16(Z[v][i])
  int mismatches = 0;
  for (int v = 0; v < 16; ++v)
    for (int i = 0; i < 16; ++i) mismatches += Zt[i * 16 + v] != to_bf16(Z[v * 16 + i]);
  EXPECT_EQ(mismatches, 0);
}

TEST(Ptx, PreparationProductsFromRecordTiles) {
  KDA_SKIP_WITHOUT_SM90();
  std::mt19937 rng(10);
  std::normal_distribution<float> nd;
  std::vector<float> X(16 * 128), W(16 * 128), F(256);
  std::vector<uint16_t> x_sw(16 * 128), w_sw(16 * 128);
  for (int i = 0; i < 16; ++i)
    for (int c = 0; c < 128; ++c) {
      const uint16_t bx = to_bf16(nd(rng)), bw = to_bf16(nd(rng));
      X[i * 128 + c] = from_bf16(bx);
      W[i * 128 + c] = from_bf16(bw);
      x_sw[ChunkRecord::wide_index(i, c)] = bx;
      w_sw[ChunkRecord::wide_index(i, c)] = bw;
    }
  for (auto& v : F) v = nd(rng);
  std::vector<double> y_ref(256, 0.0), z_ref(16 * 128, 0.0);
  for (int i = 0; i < 16; ++i)
    for (int j = 0; j < 16; ++j)
      for (int c = 0; c < 128; ++c) y_ref[i * 16 + j] += double(X[i * 128 + c]) * W[j * 128 + c];
  for (int i = 0; i < 16; ++i)
    for (int c = 0; c < 128; ++c)
      for (int j = 0; j < 16; ++j) z_ref[i * 128 + c] += double(F[i * 16 + j]) * W[j * 128 + c];
  Buf<uint16_t> dx(x_sw), dw(w_sw), dz(16 * 128);
  Buf<float> dF(F), dY(256), dY2(256);
  probe_prep_products<<<1, 32>>>(dx.d, dw.d, dF.d, dY.d, dz.d, dY2.d);
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  EXPECT_LT(max_rel(dY.get(), y_ref), 1e-5);
  EXPECT_LT(max_rel(dY2.get(), y_ref), 1e-5);  // load_b_nmajor_ntile
  const std::vector<uint16_t> z_sw = dz.get();
  std::vector<float> z(16 * 128);
  for (int i = 0; i < 16; ++i)
    for (int c = 0; c < 128; ++c) z[i * 128 + c] = from_bf16(z_sw[ChunkRecord::wide_index(i, c)]);
  EXPECT_LT(max_rel(z, z_ref), 8e-3);  // bf16 output of a ~16-bit-accurate product
}

TEST(Ptx, FragmentCoordinatesCoverTheTile) {
  // Host-only: the C fragment coordinates of 32 lanes x 4 registers cover a 16x8 tile exactly once.
  int seen[16][8] = {};
  for (int lane = 0; lane < 32; ++lane)
    for (int r = 0; r < 4; ++r) ++seen[Frag::c_row(lane, r)][Frag::c_col(lane, r)];
  for (auto& row : seen)
    for (int x : row) EXPECT_EQ(x, 1);
  // The swizzled record layouts are permutations of their tiles.
  std::vector<int> wide(16 * 128, 0), small(256, 0);
  for (int i = 0; i < 16; ++i) {
    for (int c = 0; c < 128; ++c) ++wide[ChunkRecord::wide_index(i, c)];
    for (int c = 0; c < 16; ++c) ++small[ChunkRecord::small_index(i, c)];
  }
  for (int x : wide) EXPECT_EQ(x, 1);
  for (int x : small) EXPECT_EQ(x, 1);
}

}  // namespace
}  // namespace kda::test
