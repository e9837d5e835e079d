/* SwAMP's log-domain Sinkhorn (harness/ops/ot.py, `sinkhorn`) for float32 on x86-64 CPUs: AVX2 and FMA
   (SK_WIDTH=8) or AVX-512 (SK_WIDTH=16); harness/ops/native.py builds this file once per width.

   The same iteration and the same -80 exponent floor as the eager reference. What makes it fast is that floor:
   SwAMP's exponents (eta * log p, with log p from cosines over a small tau) spread over thousands, so in a
   log-sum-exp pass nearly every entry lies more than 80 below its row's or column's maximum and contributes
   less than exp(-80) relative to it. Each pass tests a vector of entries at once against the floor and
   evaluates exp only for those that clear it; the rest of the pass is a read of the matrix and a compare.
   Nothing is written but the potentials and the output rows; eta * log p is formed from the logits in every
   pass, never stored.

   No Python or torch headers: plain C with intrinsics, loaded with ctypes. */
#include <float.h>
#include <math.h>
#include <stdint.h>
#include <immintrin.h>

#define FLOOR (-80.0f)

#ifndef SK_WIDTH
#define SK_WIDTH 8
#endif

#if SK_WIDTH == 16
#define TARGET __attribute__((target("avx512f")))
#define W 16
typedef __m512 vf;
#define VLOAD _mm512_loadu_ps
#define VSTORE _mm512_storeu_ps
#define VSET1 _mm512_set1_ps
#define VZERO _mm512_setzero_ps
#define VADD _mm512_add_ps
#define VSUB _mm512_sub_ps
#define VMUL _mm512_mul_ps
#define VDIV _mm512_div_ps
#define VMAX _mm512_max_ps
#define VFMADD _mm512_fmadd_ps
#define VFNMADD _mm512_fnmadd_ps
typedef __mmask16 vm;
#define VGT(a, b) _mm512_cmp_ps_mask((a), (b), _CMP_GT_OQ)
#define VANY(m) ((m) != 0)
#define VADD_WHERE(acc, m, e) _mm512_mask_add_ps((acc), (m), (acc), (e))
#define VHMAX _mm512_reduce_max_ps
#define VHSUM _mm512_reduce_add_ps
#define VROUND(x) _mm512_roundscale_ps((x), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC)
#define VPOW2I(n) _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_add_epi32(_mm512_cvtps_epi32(n), \
                                                                         _mm512_set1_epi32(127)), 23))
/* lanes whose exponent bits are all ones: inf or nan */
#define VNONFINITE_MASK(v) ((unsigned)_mm512_cmpeq_epi32_mask( \
    _mm512_and_si512(_mm512_castps_si512(v), _mm512_set1_epi32(0x7f800000)), _mm512_set1_epi32(0x7f800000)))

int sk_cpu_supported(void) {
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx512f");
}
#else
#define TARGET __attribute__((target("avx2,fma")))
#define W 8
typedef __m256 vf;
#define VLOAD _mm256_loadu_ps
#define VSTORE _mm256_storeu_ps
#define VSET1 _mm256_set1_ps
#define VZERO _mm256_setzero_ps
#define VADD _mm256_add_ps
#define VSUB _mm256_sub_ps
#define VMUL _mm256_mul_ps
#define VDIV _mm256_div_ps
#define VMAX _mm256_max_ps
#define VFMADD _mm256_fmadd_ps
#define VFNMADD _mm256_fnmadd_ps
typedef __m256 vm;
#define VGT(a, b) _mm256_cmp_ps((a), (b), _CMP_GT_OQ)
#define VANY(m) (!_mm256_testz_ps((m), (m)))
#define VADD_WHERE(acc, m, e) _mm256_add_ps((acc), _mm256_and_ps((m), (e)))
#define VROUND(x) _mm256_round_ps((x), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC)
#define VPOW2I(n) _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(n), \
                                                                         _mm256_set1_epi32(127)), 23))
#define VNONFINITE_MASK(v) ((unsigned)_mm256_movemask_ps(_mm256_castsi256_ps(_mm256_cmpeq_epi32( \
    _mm256_and_si256(_mm256_castps_si256(v), _mm256_set1_epi32(0x7f800000)), _mm256_set1_epi32(0x7f800000)))))

static inline TARGET float VHMAX(__m256 v) {
    __m128 m = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    m = _mm_max_ps(m, _mm_movehl_ps(m, m));
    m = _mm_max_ss(m, _mm_shuffle_ps(m, m, 1));
    return _mm_cvtss_f32(m);
}

static inline TARGET float VHSUM(__m256 v) {
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_shuffle_ps(s, s, 1));
    return _mm_cvtss_f32(s);
}

int sk_cpu_supported(void) {
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
}
#endif

/* exp(x) for x in [-88, 0]: Cephes' single-precision range reduction and polynomial (about 1 ulp). */
static inline TARGET vf vexp(vf x) {
    vf n = VROUND(VMUL(x, VSET1(1.44269504088896341f)));
    vf r = VFNMADD(n, VSET1(0.693359375f), x);
    r = VFNMADD(n, VSET1(-2.12194440e-4f), r);
    vf p = VSET1(1.9875691500e-4f);
    p = VFMADD(p, r, VSET1(1.3981999507e-3f));
    p = VFMADD(p, r, VSET1(8.3334519073e-3f));
    p = VFMADD(p, r, VSET1(4.1665795894e-2f));
    p = VFMADD(p, r, VSET1(1.6666665459e-1f));
    p = VFMADD(p, r, VSET1(5.0000001201e-1f));
    p = VADD(VFMADD(p, VMUL(r, r), r), VSET1(1.0f));
    return VMUL(p, VPOW2I(n));
}

/* One modality's problem: the logits (n, k) row-major, and what the passes keep. */
typedef struct {
    const float* x;
    int n, k, iters, from_logits, out_rows;
    float eta;
    float* q;     /* (out_rows, k): the first out_rows rows of the targets */
    float* lse;   /* (n): each row's log-sum-exp of x (0 when !from_logits) */
    float* f;     /* (n): row potentials */
    float* g;     /* (k): column potentials */
    float* cmax;  /* (k) */
    float* csum;  /* (k) */
    int status;   /* 0: solved; 1: a non-finite logit (nothing solved) */
} Problem;

/* eta * log p of row i, W entries from column j: (x - lse_i) * eta, rounded as the eager code rounds it. */
static inline TARGET vf mvec(const float* xr, int j, vf lse, vf eta) {
    return VMUL(VSUB(VLOAD(xr + j), lse), eta);
}
static inline float mone(const float* xr, int j, float lse, float eta) { return (xr[j] - lse) * eta; }

/* acc[l] += exp(d[l]) for the lanes of `m` (the entries above the floor); d is clamped at the floor first so
   that the other lanes' exp stays finite, and they add nothing. */
static inline TARGET void add_exp_where(vf d, vm m, float* acc) {
    vf a = VLOAD(acc);
    VSTORE(acc, VADD_WHERE(a, m, vexp(VMAX(d, VSET1(FLOOR)))));
}

/* Row i's log-sum-exp of x into lse[i] (0 when !from_logits: x is log p already): the row's max, then exp of
   every entry clamped at the floor. Returns 1 when a logit of the row is not finite. */
static TARGET int row_logit_lse(Problem* p, int i) {
    const int k = p->k, kw = k - k % W;
    const float* xr = p->x + (long)i * k;
    unsigned bad = 0;
    vf mxv = VSET1(-FLT_MAX);
    float mx = -FLT_MAX;
    for (int j = 0; j < kw; j += W) {
        vf v = VLOAD(xr + j);
        bad |= VNONFINITE_MASK(v);
        mxv = VMAX(mxv, v);
    }
    if (bad) return 1;
    for (int j = kw; j < k; j++) {
        if (!isfinite(xr[j])) return 1;
        mx = xr[j] > mx ? xr[j] : mx;
    }
    if (kw) { float h = VHMAX(mxv); mx = h > mx ? h : mx; }
    if (!p->from_logits) { p->lse[i] = 0.0f; return 0; }
    const vf m = VSET1(mx), fl = VSET1(FLOOR);
    vf sv = VZERO();
    for (int j = 0; j < kw; j += W) sv = VADD(sv, vexp(VMAX(VSUB(VLOAD(xr + j), m), fl)));
    float s = VHSUM(sv);
    for (int j = kw; j < k; j++) { float d = xr[j] - mx; s += expf(d > FLOOR ? d : FLOOR); }
    p->lse[i] = mx + logf(s);
    return 0;
}

/* g_k = -(log Σ_i exp(m_ik + f_i) + log k): the columns' step. A read for the columns' maxima, then a read that
   tests a vector of entries at a time against the floor below their column's max and takes exp only of those
   that clear it. */
static TARGET void column_step(Problem* p) {
    const int n = p->n, k = p->k, kw = k - k % W;
    const vf eta = VSET1(p->eta), fl = VSET1(FLOOR);
    for (int j = 0; j < k; j++) { p->cmax[j] = -FLT_MAX; p->csum[j] = 0.0f; }
    for (int i = 0; i < n; i++) {
        const float* xr = p->x + (long)i * k;
        const vf lse = VSET1(p->lse[i]), f = VSET1(p->f[i]);
        for (int j = 0; j < kw; j += W)
            VSTORE(p->cmax + j, VMAX(VLOAD(p->cmax + j), VADD(mvec(xr, j, lse, eta), f)));
        for (int j = kw; j < k; j++) {
            float v = mone(xr, j, p->lse[i], p->eta) + p->f[i];
            p->cmax[j] = v > p->cmax[j] ? v : p->cmax[j];
        }
    }
    for (int i = 0; i < n; i++) {
        const float* xr = p->x + (long)i * k;
        const vf lse = VSET1(p->lse[i]), f = VSET1(p->f[i]);
        for (int j = 0; j < kw; j += W) {
            vf d = VSUB(VADD(mvec(xr, j, lse, eta), f), VLOAD(p->cmax + j));
            vm hit = VGT(d, fl);
            if (VANY(hit)) add_exp_where(d, hit, p->csum + j);
        }
        for (int j = kw; j < k; j++) {
            float d = (mone(xr, j, p->lse[i], p->eta) + p->f[i]) - p->cmax[j];
            if (d > FLOOR) p->csum[j] += expf(d);
        }
    }
    const float logk = (float)log((double)k);
    for (int j = 0; j < k; j++) p->g[j] = -((p->cmax[j] + logf(p->csum[j])) + logk);
}

/* log Σ_j exp(m_ij + g_j) of row i: its max, then the same floor test as the columns' step. */
static TARGET float row_lse(const Problem* p, int i) {
    const int k = p->k, kw = k - k % W;
    const float* xr = p->x + (long)i * k;
    const vf eta = VSET1(p->eta), lse = VSET1(p->lse[i]), fl = VSET1(FLOOR);
    vf mxv = VSET1(-FLT_MAX);
    float mx = -FLT_MAX;
    for (int j = 0; j < kw; j += W) mxv = VMAX(mxv, VADD(mvec(xr, j, lse, eta), VLOAD(p->g + j)));
    if (kw) mx = VHMAX(mxv);
    for (int j = kw; j < k; j++) {
        float v = mone(xr, j, p->lse[i], p->eta) + p->g[j];
        mx = v > mx ? v : mx;
    }
    const vf m = VSET1(mx);
    float acc[W] = {0};
    for (int j = 0; j < kw; j += W) {
        vf d = VSUB(VADD(mvec(xr, j, lse, eta), VLOAD(p->g + j)), m);
        vm hit = VGT(d, fl);
        if (VANY(hit)) add_exp_where(d, hit, acc);
    }
    float s = 0.0f;
    for (int l = 0; l < W; l++) s += acc[l];
    for (int j = kw; j < k; j++) {
        float d = (mone(xr, j, p->lse[i], p->eta) + p->g[j]) - mx;
        if (d > FLOOR) s += expf(d);
    }
    return mx + logf(s);
}

/* The last row step as a softmax of m + g over each output row (rows sum to 1 up to one rounding). */
static TARGET void output_rows(Problem* p) {
    const int k = p->k, kw = k - k % W;
    const vf eta = VSET1(p->eta), fl = VSET1(FLOOR);
    for (int i = 0; i < p->out_rows; i++) {
        const float* xr = p->x + (long)i * k;
        float* o = p->q + (long)i * k;
        const vf lse = VSET1(p->lse[i]);
        for (int j = 0; j < kw; j += W) VSTORE(o + j, VADD(mvec(xr, j, lse, eta), VLOAD(p->g + j)));
        for (int j = kw; j < k; j++) o[j] = mone(xr, j, p->lse[i], p->eta) + p->g[j];
        float mx = -FLT_MAX;
        for (int j = 0; j < k; j++) mx = o[j] > mx ? o[j] : mx;
        const vf m = VSET1(mx);
        vf sv = VZERO();
        for (int j = 0; j < kw; j += W) {
            vf e = vexp(VMAX(VSUB(VLOAD(o + j), m), fl));
            VSTORE(o + j, e);
            sv = VADD(sv, e);
        }
        float s = VHSUM(sv);
        for (int j = kw; j < k; j++) { float d = o[j] - mx; o[j] = expf(d > FLOOR ? d : FLOOR); s += o[j]; }
        const vf sw = VSET1(s);
        for (int j = 0; j < kw; j += W) VSTORE(o + j, VDIV(VLOAD(o + j), sw));
        for (int j = kw; j < k; j++) o[j] = o[j] / s;
    }
}

static TARGET void solve(Problem* p) {
    const float logn = (float)log((double)p->n);
    for (int i = 0; i < p->n; i++) {
        if (row_logit_lse(p, i)) { p->status = 1; return; }
        p->f[i] = 0.0f;
    }
    for (int it = 0; it < p->iters; it++) {
        column_step(p);
        if (it + 1 < p->iters)
            for (int i = 0; i < p->n; i++) p->f[i] = -(row_lse(p, i) + logn);
    }
    output_rows(p);
    p->status = 0;
}

/* Solves `count` (1 or 2) independent problems; with threads >= 2 and two problems, one thread each (OpenMP: the
   process's one runtime, torch's thread pool where torch has loaded it). work: n + n + k + k + k floats per
   problem (lse, f, g, cmax, csum). Returns, per problem, 0 (solved) or 1 (a non-finite logit: the caller falls
   back) in status[]. */
int sk_solve(int count, const float* const* x, const int* n, int k, float eta, int iters, int from_logits,
             int out_rows_max, float* const* q, float* const* work, int threads, int* status) {
    if (count < 1 || count > 2) return -1;
    Problem pr[2];
    for (int c = 0; c < count; c++) {
        Problem* p = &pr[c];
        p->x = x[c]; p->n = n[c]; p->k = k; p->iters = iters; p->from_logits = from_logits; p->eta = eta;
        p->out_rows = out_rows_max < n[c] ? out_rows_max : n[c];
        p->q = q[c];
        p->lse = work[c]; p->f = p->lse + n[c]; p->g = p->f + n[c]; p->cmax = p->g + k; p->csum = p->cmax + k;
        p->status = 0;
    }
    int t = threads < count ? threads : count;
    #pragma omp parallel for num_threads(t > 0 ? t : 1) schedule(static, 1)
    for (int c = 0; c < count; c++) solve(&pr[c]);
    for (int c = 0; c < count; c++) status[c] = pr[c].status;
    return 0;
}
