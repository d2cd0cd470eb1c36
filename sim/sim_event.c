/* sim_event: a radix heap over the times' bits, with a FIFO per time.
 *
 * Why this shape: the times the engine pops never decrease (times are >= now), and for such
 * monotone queues a radix heap does less work than any comparison heap. A key is a time's
 * IEEE-754 bits (see time_bits()), read as 8 digits of 8 bits, most significant first. An entry
 * sits in bucket (p, v) when p is the highest digit in which its key differs from the last
 * popped key and v is its own digit p (larger than the last key's); a key equal to the last one
 * sits in bucket (0, its digit 0). Every key in a bucket is smaller than every key in a later
 * bucket, so the earliest event is in the first non-empty bucket, found with two
 * count-trailing-zeros over a bitmap. A bucket of level 0 holds one key only: its entries all
 * have the same time, and a pop takes the first of them. A bucket of a higher level is emptied
 * by a pop: its least time (kept by the bucket, so the pop does not search for it) becomes the
 * last key, and its entries move, in one sequential pass, to buckets of lower digits, those of
 * that least time to its level-0 bucket, from which the pop then takes the first; when the
 * bucket holds one time only (its greatest time, kept too, is its least), its list becomes that
 * level-0 bucket as it is, without moving an entry. An entry only
 * ever moves to a lower digit, so at most 8 times, and in the hold model about twice; each move
 * is an XOR, a count of leading zeros and an append, where a heap pays a comparison and (at 10^6
 * pending) a dependent cache miss per level on every pop.
 *
 * Equal times: among entries of one time the pop order is the schedule order, with no
 * tie-break key. Every bucket keeps its entries in the order they arrived, and entries of equal
 * time arrive in schedule order: a schedule appends the newest entry, and a pop moves entries
 * only into buckets that are empty (all lower than the one it empties), in their order. So when
 * a time becomes the last key, its entries reach its level-0 bucket in schedule order, and later
 * schedules at that time append behind them. The many events of one time (an iteration's steps
 * on the workers of one device type) thus cost at most one move and one read each, where a
 * tie-break rank in the key walked them through its digits.
 *
 * Memory: buckets are linked lists of 512-byte chunks (16 entries of 32 bytes: the time's bits
 * and the payload, so a pop reads the payload where it reads the key) from one store shared by
 * all buckets, with a free list, so a bucket that empties gives its chunks straight back and
 * the chunks in use never exceed pending/16 + 2051 (at most one partly filled chunk per bucket,
 * one partly read chunk of the level-0 bucket being popped, and the chunk a pop is moving from).
 * The store is grown only in schedule, where a failure can be reported, to that bound; a pop
 * therefore never allocates. Store pages that a small queue never reaches are never touched. */
#include "sim/sim_event.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define HS_CHUNK_BITS 4u
#define HS_CHUNK ((uint32_t)1 << HS_CHUNK_BITS) /* entries per chunk: 512 bytes */
/* The radix: keys are read as 8 digits of 8 bits. Measured in the hold model at 10^4 pending
 * (callgrind and cachegrind over bench_events, with 128-bit keys): with 4-bit digits the
 * benchmark ran 27% more instructions and 2.1 times the branch mispredictions, with 6-bit
 * digits 12% more and 1.5 times; the larger bucket table of 8-bit digits (few buckets live at a
 * time) cost a quarter more simulated L1 misses, far less than the mispredictions it saves. */
#define HS_DIGIT_BITS 8u
#define HS_DIGIT_MASK ((1u << HS_DIGIT_BITS) - 1)
#define HS_LEVELS (63u / HS_DIGIT_BITS + 1)
#define HS_NBUCKETS (HS_LEVELS << HS_DIGIT_BITS) /* 2048 */
#define HS_LEVEL0 (1u << HS_DIGIT_BITS)         /* buckets below this index are of level 0 */
#define HS_BITMAP_WORDS ((HS_NBUCKETS + 63) / 64)
#define HS_NO_CHUNK UINT32_MAX
/* Entries ahead (8 cache lines: the next chunk) that a pop of a long run of one time asks the
 * memory for while it works on the current one: at 10^6 pending the store (32 MiB) is far out
 * of cache, and its chunks are not adjacent, so the hardware prefetcher does not see the stream
 * coming. Farther than hs_engine_ahead_worker's callers look, so that they read cached lines. */
#define HS_AHEAD 16u

typedef struct hs_heap_entry {
  uint64_t tbits; /* the time's IEEE-754 bits; see time_bits() */
  uint64_t seq;
  int64_t arg;
  uint32_t kind, worker;
} hs_heap_entry;

typedef struct hs_bucket {
  uint32_t head, tail; /* first and last chunk; all between are full */
  uint32_t count;      /* entries */
  uint32_t rd;         /* entries of the head chunk already popped (level-0 buckets), else 0 */
  uint64_t min, max;   /* the least and the greatest time's bits, valid while count > 0 */
} hs_bucket;

struct hs_engine {
  hs_bucket bucket[HS_NBUCKETS];
  uint64_t nonempty[HS_BITMAP_WORDS]; /* bit i: bucket i holds entries */
  uint64_t nonempty_words;  /* bit w: nonempty[w] != 0 */
  uint64_t last;            /* the last popped time's bits (0 before the first pop) */
  hs_heap_entry *chunks;    /* nchunks * HS_CHUNK entries */
  uint32_t *chunk_next;     /* next chunk in a bucket or in the free list */
  uint32_t nchunks;
  uint32_t free_chunk;      /* head of the free list, or HS_NO_CHUNK */
  size_t size;              /* pending events */
  size_t grow_at;           /* schedule grows the store (or refuses) when size reaches this */
  size_t max_pending;
  double now;               /* s */
  uint64_t next_seq;
  uint64_t processed;
};

/* Times are finite and >= 0 (the clock starts at 0 and never runs backwards), and for such
 * doubles the IEEE-754 bit patterns, read as unsigned integers, sort like the numbers. */
static inline uint64_t time_bits(double t) {
  uint64_t b;
  memcpy(&b, &t, sizeof b);
  return b;
}

static inline double bits_time(uint64_t b) {
  double t;
  memcpy(&t, &b, sizeof t);
  return t;
}

/* The bucket of key x relative to the last popped key: level p is the highest digit in which
 * they differ, and the bucket is (p, x's digit p). As that digit of x exceeds last's, buckets in
 * index order hold ever larger keys. x == last gives level 0 and last's own digit 0 (the `| 1`),
 * a bucket no other key can reach: a key differing from last in digit 0 alone has a larger one. */
static inline unsigned bucket_of(uint64_t x, uint64_t last) {
  uint64_t h = (x ^ last) | 1;
  unsigned p = (63u - (unsigned)__builtin_clzll(h)) / HS_DIGIT_BITS;
  return p << HS_DIGIT_BITS | ((unsigned)(x >> (p * HS_DIGIT_BITS)) & HS_DIGIT_MASK);
}

static inline unsigned first_bucket(const hs_engine *e) {
  unsigned w = (unsigned)__builtin_ctzll(e->nonempty_words);
  return w * 64u + (unsigned)__builtin_ctzll(e->nonempty[w]);
}

static inline void mark_nonempty(hs_engine *e, unsigned b) {
  e->nonempty[b / 64] |= (uint64_t)1 << (b % 64);
  e->nonempty_words |= (uint64_t)1 << (b / 64);
}

static inline void mark_empty(hs_engine *e, unsigned b) {
  uint64_t w = e->nonempty[b / 64] &= ~((uint64_t)1 << (b % 64));
  /* Without a branch: whether the word just emptied is a coin toss. */
  e->nonempty_words &= ~((uint64_t)(w == 0) << (b / 64));
}

/* Chunks the store must hold for n pending entries: n/HS_CHUNK full chunks and one more for the
 * rounding, one partly filled chunk per bucket, the partly read head of the level-0 bucket
 * being popped, and the chunk a pop is moving entries from. */
static size_t chunks_needed(size_t n) { return n / HS_CHUNK + HS_NBUCKETS + 3; }

static inline uint32_t chunk_alloc(hs_engine *e) {
  uint32_t c = e->free_chunk;
  e->free_chunk = e->chunk_next[c];
  return c;
}

static inline void chunk_free(hs_engine *e, uint32_t c) {
  e->chunk_next[c] = e->free_chunk;
  e->free_chunk = c;
}

/* Appends x to bucket b. The caller guarantees a free chunk (see chunks_needed). */
static inline void bucket_push(hs_engine *e, unsigned b, const hs_heap_entry *x) {
  hs_bucket *k = &e->bucket[b];
  uint32_t n = k->count++;
  uint32_t i = (k->rd + n) & (HS_CHUNK - 1);
  if (n == 0) {
    k->head = k->tail = chunk_alloc(e);
    k->min = k->max = x->tbits;
    mark_nonempty(e, b);
  } else {
    if (i == 0) {
      uint32_t c = chunk_alloc(e);
      e->chunk_next[k->tail] = c;
      k->tail = c;
      /* A long run of appends (an iteration's steps, all at one time) goes on into the chunk
       * the free list hands out next: ask for its lines now. */
      if (e->free_chunk != HS_NO_CHUNK)
        for (uint32_t j = 0; j < HS_CHUNK; j += 2) __builtin_prefetch(&e->chunks[(size_t)e->free_chunk * HS_CHUNK + j], 1);
    }
    k->min = x->tbits < k->min ? x->tbits : k->min;
    k->max = x->tbits > k->max ? x->tbits : k->max;
  }
  e->chunks[(size_t)k->tail * HS_CHUNK + i] = *x;
}

/* Sends the n entries stored from chunk c on to their buckets relative to e->last, freeing each
 * chunk once read (the appends that follow reuse it while it is still in cache). */
static inline void chunks_redistribute(hs_engine *e, uint32_t c, uint32_t n) {
  /* Full chunks first, then the last one: a single loop exit to mispredict in the usual case
   * of one chunk. */
  for (; n > HS_CHUNK; n -= HS_CHUNK) {
    const hs_heap_entry *src = e->chunks + (size_t)c * HS_CHUNK;
    for (uint32_t j = 0; j < HS_CHUNK; j++) bucket_push(e, bucket_of(src[j].tbits, e->last), &src[j]);
    uint32_t next = e->chunk_next[c];
    chunk_free(e, c);
    c = next;
  }
  const hs_heap_entry *src = e->chunks + (size_t)c * HS_CHUNK;
  for (uint32_t j = 0; j < n; j++) bucket_push(e, bucket_of(src[j].tbits, e->last), &src[j]);
  chunk_free(e, c);
}

int hs_engine_open(hs_engine **out, size_t max_pending, hs_diag *d) {
  *out = NULL;
  if (max_pending == 0) max_pending = HS_ENGINE_DEFAULT_MAX_PENDING;
  /* Counts and chunk numbers are 32-bit; UINT32_MAX itself marks "no chunk". */
  if (max_pending > (size_t)UINT32_MAX - 1) max_pending = (size_t)UINT32_MAX - 1;
  hs_engine *e = calloc(1, sizeof *e);
  if (!e) return hs_diag_set(d, HS_ENOMEM, "event engine: out of memory");
  e->max_pending = max_pending;
  e->free_chunk = HS_NO_CHUNK;
  *out = e;
  return 0;
}

void hs_engine_close(hs_engine *e) {
  if (!e) return;
  free(e->chunks);
  free(e->chunk_next);
  free(e);
}

/* Makes room for one more pending event: grows the chunk store to chunks_needed(size + 1) (by
 * doubling, so that growth costs amortized O(1)), then sets grow_at, the size up to which
 * schedule needs no growth. Changes nothing the caller can observe on failure. */
static int engine_reserve(hs_engine *e, hs_diag *d) {
  size_t need = chunks_needed(e->size + 1);
  if (need > e->nchunks) {
    size_t n = (size_t)e->nchunks * 2;
    if (n < need) n = need;
    size_t most = chunks_needed(e->max_pending);
    if (n > most) n = most;
    uint32_t *next = realloc(e->chunk_next, n * sizeof *next);
    if (!next)
      return hs_diag_set(d, HS_ENOMEM,
                         "event engine: out of memory growing the queue to %zu events",
                         e->size + 1);
    e->chunk_next = next;
    hs_heap_entry *mem = realloc(e->chunks, n * HS_CHUNK * sizeof *mem);
    if (!mem)
      return hs_diag_set(d, HS_ENOMEM,
                         "event engine: out of memory growing the queue to %zu events",
                         e->size + 1);
    e->chunks = mem;
    /* Pushed from the top down, so the free list hands out the lowest new chunk first and
     * pages of the store that a small queue never needs are never touched. */
    for (size_t c = n; c-- > e->nchunks;) chunk_free(e, (uint32_t)c);
    e->nchunks = (uint32_t)n;
  }
  /* chunks_needed(s + 1) <= nchunks for every s < most_by_chunks. */
  size_t most_by_chunks = (e->nchunks - HS_NBUCKETS - 3 + 1) * (size_t)HS_CHUNK - 1;
  e->grow_at = e->max_pending < most_by_chunks ? e->max_pending : most_by_chunks;
  return 0;
}

int hs_engine_schedule(hs_engine *e, double time, uint32_t kind, uint32_t worker, int64_t arg,
                       hs_diag *d) {
  /* The negated test also rejects NaN, which would otherwise poison the key order. */
  if (!(time >= e->now) || !isfinite(time))
    return hs_diag_set(d, HS_EINVAL,
                       "event engine: cannot schedule an event at t=%.17g s before now=%.17g s "
                       "(kind %u, worker %u)",
                       time, e->now, kind, worker);
  if (e->size >= e->grow_at) {
    if (e->size >= e->max_pending)
      return hs_diag_set(d, HS_ELIMIT,
                         "event engine: more than %zu pending events (the limit); raise it with "
                         "--max-events N (e.g. --max-events %zu)",
                         e->max_pending, e->max_pending * 2);
    int rc = engine_reserve(e, d);
    if (rc) return rc;
  }
  /* Adding 0.0 turns -0.0 into +0.0, whose bits would otherwise sort after every positive time. */
  hs_heap_entry x = {.tbits = time_bits(time + 0.0), .seq = e->next_seq++, .arg = arg, .kind = kind,
                     .worker = worker};
  unsigned b = bucket_of(x.tbits, e->last);
  bucket_push(e, b, &x);
  e->size++;
  return 0;
}

int hs_engine_pop(hs_engine *e, hs_event *out) {
  if (e->size == 0) return 0;
  unsigned b = first_bucket(e);
  hs_bucket *k = &e->bucket[b];
  hs_heap_entry x;
  e->last = k->min;
  if (b >= HS_LEVEL0) {
    /* Empty the bucket. Its other entries agree with the new last key in every digit above
     * their level and differ from it below, so each goes to a lower bucket, all of which are
     * empty; those of the last key's time go to its level-0 bucket, in their order. */
    uint32_t c = k->head, n = k->count;
    k->count = 0;
    mark_empty(e, b);
    if (n == 1) { /* the usual case in a spread-out queue: nothing to move */
      x = e->chunks[(size_t)c * HS_CHUNK];
      chunk_free(e, c);
      goto popped;
    }
    unsigned z = (unsigned)(e->last & HS_DIGIT_MASK);
    if (k->min == k->max) {
      /* One time only (the steps of many workers ending together): the list becomes that
       * time's level-0 bucket as it is, in its order, without moving an entry. */
      e->bucket[z] = *k;
      e->bucket[z].count = n;
      mark_nonempty(e, z);
    } else {
      chunks_redistribute(e, c, n);
    }
    b = z;
    k = &e->bucket[b];
  }
  /* A level-0 bucket: one time, entries in schedule order; take the first, and ask for the
   * line of an entry a few pops ahead. */
  x = e->chunks[(size_t)k->head * HS_CHUNK + k->rd];
  if (k->count > HS_AHEAD) {
    uint32_t j = k->rd + HS_AHEAD, c = j < HS_CHUNK ? k->head : e->chunk_next[k->head];
    __builtin_prefetch(&e->chunks[(size_t)c * HS_CHUNK + (j & (HS_CHUNK - 1))]);
  }
  if (--k->count == 0) {
    chunk_free(e, k->head);
    k->rd = 0;
    mark_empty(e, b);
  } else if (++k->rd == HS_CHUNK) {
    uint32_t next = e->chunk_next[k->head];
    chunk_free(e, k->head);
    k->head = next;
    k->rd = 0;
  }
popped:
  e->size--;
  e->now = bits_time(x.tbits);
  e->processed++;
  *out = (hs_event){.time = e->now, .seq = x.seq, .kind = x.kind, .worker = x.worker, .arg = x.arg};
  return 1;
}

/* Reads the earliest event without making its time the last key: a later schedule may still be
 * earlier than it (though not earlier than now). In a bucket of a higher level that is the
 * bucket's first entry of its least time, found by a scan: O(bucket), fine for a call that only
 * the tests make. */
int hs_engine_peek(const hs_engine *e, hs_event *out) {
  if (e->size == 0) return 0;
  unsigned b = first_bucket(e);
  const hs_bucket *k = &e->bucket[b];
  uint32_t c = k->head, j = k->rd;
  if (b >= HS_LEVEL0)
    for (uint32_t left = k->count; e->chunks[(size_t)c * HS_CHUNK + j].tbits != k->min && --left > 0;)
      if (++j == HS_CHUNK) {
        c = e->chunk_next[c];
        j = 0;
      }
  const hs_heap_entry *x = &e->chunks[(size_t)c * HS_CHUNK + j];
  *out = (hs_event){.time = bits_time(x->tbits), .seq = x->seq, .kind = x->kind, .worker = x->worker,
                    .arg = x->arg};
  return 1;
}

uint32_t hs_engine_ahead_worker(const hs_engine *e, uint32_t ahead) {
  if (e->size == 0) return UINT32_MAX;
  /* The run being popped is the level-0 bucket of the last key, the first non-empty bucket
   * whenever it holds entries; its order is the pop order. */
  const hs_bucket *k = &e->bucket[e->last & HS_DIGIT_MASK];
  if (k->count <= ahead || ahead >= HS_CHUNK) return UINT32_MAX;
  uint32_t j = k->rd + ahead, c = j < HS_CHUNK ? k->head : e->chunk_next[k->head];
  return e->chunks[(size_t)c * HS_CHUNK + (j & (HS_CHUNK - 1))].worker;
}

double hs_engine_now(const hs_engine *e) { return e->now; }
size_t hs_engine_pending(const hs_engine *e) { return e->size; }
uint64_t hs_engine_processed(const hs_engine *e) { return e->processed; }
size_t hs_engine_max_pending(const hs_engine *e) { return e->max_pending; }
