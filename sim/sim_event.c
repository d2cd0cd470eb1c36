/* sim_event: a radix heap over 128-bit (time, tie-break) keys, plus a payload pool.
 *
 * Why this shape: the keys the engine pops never decrease (times are >= now, and the tie-break
 * rank only grows), and for such monotone queues a radix heap does less work than any
 * comparison heap. Keys are read as 16 digits of 8 bits, most significant first. An entry sits
 * in bucket (p, v) when p is the highest digit in which its key differs from the last popped
 * key and v is its own digit p (larger than the last key's). Every key in a bucket is smaller
 * than every key in a later bucket, so the earliest event is the minimum of the first
 * non-empty bucket, found with two count-trailing-zeros over a bitmap. Each bucket keeps its
 * minimum apart from its other entries, so peek is O(1); a pop takes that minimum, makes it the
 * new last key and moves the rest of its bucket to buckets of lower digits in one sequential
 * pass. An entry only ever moves to a lower digit, so at most 15 times, and in the hold model
 * about twice; each move is an XOR, a count of leading zeros and an append, where a heap pays a
 * comparison and (at 10^6 pending) a dependent cache miss per level on every pop. The
 * determinism contract is the heap's: the pop order is exactly the (time, rank) order.
 *
 * Keys: the time's IEEE-754 bits (see time_bits()) above a tie-break word that packs a rank
 * (insertion order) above the pool slot index, so every key is unique and equal times pop in
 * schedule order. The rank gets 64 - slot_bits bits (>= 32); when it runs out the pending
 * entries are sorted and renumbered 0..n-1, which keeps their relative order, and the buckets
 * are rebuilt around a last key of (now, 0).
 *
 * Memory: a bucket's entries other than its minimum live in a linked list of 512-byte chunks
 * from one store shared by all buckets, with a free list, so a bucket that empties gives its
 * chunks straight back and the chunks in use never exceed pending/32 + 4098 (at most one
 * partly filled chunk per bucket). The store is grown only in schedule, where a failure can be
 * reported, to that bound; a pop therefore never allocates. Store pages that a small queue
 * never reaches are never touched. The payload (kind, worker, arg, seq) sits in a pool and is
 * touched once on schedule and once on pop. */
#include "sim/sim_event.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define HS_ENGINE_INITIAL_CAP 1024u
#define HS_CHUNK_BITS 5u
#define HS_CHUNK ((uint32_t)1 << HS_CHUNK_BITS) /* entries per chunk: 512 bytes */
/* The radix: keys are read as 16 digits of 8 bits. Measured in the hold model at 10^4 pending
 * (callgrind and cachegrind over bench_events): with 4-bit digits the benchmark ran 27% more
 * instructions and 2.1 times the branch mispredictions, with 6-bit digits 12% more and 1.5
 * times; the larger bucket table of 8-bit digits (128 KiB, few buckets live at a time) cost a
 * quarter more simulated L1 misses, far less than the mispredictions it saves. */
#define HS_DIGIT_BITS 8u
#define HS_DIGIT_MASK ((1u << HS_DIGIT_BITS) - 1)
#define HS_LEVELS (127u / HS_DIGIT_BITS + 1)
#define HS_NBUCKETS (HS_LEVELS << HS_DIGIT_BITS) /* 4096 */
#define HS_BITMAP_WORDS ((HS_NBUCKETS + 63) / 64)
#define HS_NO_CHUNK UINT32_MAX
#define HS_NO_SLOT UINT32_MAX

typedef struct hs_heap_entry {
  uint64_t tbits; /* the time's IEEE-754 bits; see time_bits() */
  uint64_t key;   /* rank << slot_bits | slot */
} hs_heap_entry;

typedef struct hs_bucket {
  uint32_t head, tail; /* first and last chunk of the count - 1 other entries; all but the
                          last chunk are full */
  uint32_t count;      /* entries, the minimum included */
  uint32_t unused;
  hs_heap_entry min;   /* valid while count > 0; not stored in the chunks */
} hs_bucket;

typedef struct hs_payload {
  uint64_t seq;  /* insertion number reported to the caller */
  int64_t arg;
  uint32_t kind; /* while the slot is free: index of the next free slot */
  uint32_t worker;
} hs_payload;

struct hs_engine {
  hs_bucket bucket[HS_NBUCKETS];
  uint64_t nonempty[HS_BITMAP_WORDS]; /* bit i: bucket i holds entries */
  uint64_t nonempty_words;  /* bit w: nonempty[w] != 0 */
  hs_heap_entry last;       /* the last popped key (or a lower bound after a renumbering) */
  hs_heap_entry *chunks;    /* nchunks * HS_CHUNK entries */
  uint32_t *chunk_next;     /* next chunk in a bucket or in the free list */
  uint32_t nchunks;
  uint32_t free_chunk;      /* head of the free list, or HS_NO_CHUNK */
  hs_payload *pool;
  size_t size;              /* pending events = live entries = live pool slots */
  size_t cap;               /* allocated pool slots */
  size_t grow_at;           /* schedule grows the pool or the store when size reaches this */
  size_t pool_hw;           /* slots [0, pool_hw) have been handed out at least once */
  uint32_t free_head;       /* first free slot below pool_hw, or HS_NO_SLOT */
  unsigned slot_bits;       /* bits of key that hold the slot */
  uint64_t slot_mask;
  uint64_t next_rank;
  uint64_t rank_limit;      /* renumber when next_rank reaches this */
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

__extension__ typedef unsigned __int128 u128;

static inline int entry_less(const hs_heap_entry *a, const hs_heap_entry *b) {
  u128 ka = ((u128)a->tbits << 64) | a->key, kb = ((u128)b->tbits << 64) | b->key;
  return ka < kb;
}

static int entry_cmp(const void *pa, const void *pb) {
  const hs_heap_entry *a = pa, *b = pb;
  return entry_less(a, b) ? -1 : entry_less(b, a) ? 1 : 0;
}

/* The bucket of x relative to the last popped key. Read both keys as 16 digits of 8 bits (most
 * significant first); level p is the highest digit in which they differ, and the bucket is
 * (p, x's digit p). As that digit of x exceeds last's, buckets in index order hold ever larger
 * keys. x == last (possible only right after a renumbering) lands in bucket (0, its digit 0),
 * below every other key of level 0. */
static inline unsigned bucket_of(const hs_heap_entry *x, const hs_heap_entry *last) {
  uint64_t h = x->tbits ^ last->tbits;
  if (h) { /* the usual case: the times differ */
    unsigned p = (127u - (unsigned)__builtin_clzll(h)) / HS_DIGIT_BITS;
    return p << HS_DIGIT_BITS | ((unsigned)(x->tbits >> (p * HS_DIGIT_BITS - 64)) & HS_DIGIT_MASK);
  }
  uint64_t l = x->key ^ last->key;
  unsigned p = l ? (63u - (unsigned)__builtin_clzll(l)) / HS_DIGIT_BITS : 0;
  return p << HS_DIGIT_BITS | ((unsigned)(x->key >> (p * HS_DIGIT_BITS)) & HS_DIGIT_MASK);
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

/* Chunks the store must hold for n pending entries: n/HS_CHUNK full chunks, one partly filled
 * chunk per bucket, and the chunk a pop is reading from. */
static size_t chunks_needed(size_t n) { return n / HS_CHUNK + HS_NBUCKETS + 2; }

/* Adds x to bucket b. A bucket keeps its minimum apart and the other entries in its chunks, so
 * a pop neither searches for nor skips the minimum. The caller guarantees a free chunk (see
 * chunks_needed). */
static inline void bucket_push(hs_engine *e, unsigned b, hs_heap_entry x) {
  hs_bucket *k = &e->bucket[b];
  uint32_t n = k->count++;
  if (n == 0) {
    k->min = x;
    mark_nonempty(e, b);
    return;
  }
  /* Keep the smaller of x and the minimum, store the other; selects rather than a branch,
   * since which one wins is a coin toss. */
  hs_heap_entry m = k->min;
  uint64_t take = 0 - (uint64_t)entry_less(&x, &m); /* all ones when x is the new minimum */
  uint64_t dt = (x.tbits ^ m.tbits) & take, dk = (x.key ^ m.key) & take;
  hs_heap_entry y = {.tbits = x.tbits ^ dt, .key = x.key ^ dk};
  k->min = (hs_heap_entry){.tbits = m.tbits ^ dt, .key = m.key ^ dk};
  uint32_t i = (n - 1) & (HS_CHUNK - 1);
  if (i == 0) {
    uint32_t c = e->free_chunk;
    e->free_chunk = e->chunk_next[c];
    e->chunk_next[c] = HS_NO_CHUNK;
    if (n == 1)
      k->head = c;
    else
      e->chunk_next[k->tail] = c;
    k->tail = c;
  }
  e->chunks[(size_t)k->tail * HS_CHUNK + i] = y;
}

static inline void chunk_free(hs_engine *e, uint32_t c) {
  e->chunk_next[c] = e->free_chunk;
  e->free_chunk = c;
}

/* Empties bucket b: returns its minimum, and in *c and *n the first chunk and the number of
 * the other entries, which the caller reads and then hands back chunk by chunk. */
static inline hs_heap_entry bucket_take(hs_engine *e, unsigned b, uint32_t *c, uint32_t *n) {
  hs_bucket *k = &e->bucket[b];
  *n = k->count - 1;
  *c = k->head;
  k->count = 0;
  mark_empty(e, b);
  return k->min;
}

/* Sends the n entries stored from chunk c on to their buckets relative to e->last, freeing
 * each chunk once read (the appends that follow reuse it while it is still in cache). */
static inline void chunks_redistribute(hs_engine *e, uint32_t c, uint32_t n) {
  if (n == 0) return;
  /* Full chunks first, then the last one: a single loop exit to mispredict in the usual case
   * of one chunk. */
  for (; n > HS_CHUNK; n -= HS_CHUNK) {
    const hs_heap_entry *src = e->chunks + (size_t)c * HS_CHUNK;
    for (uint32_t j = 0; j < HS_CHUNK; j++) bucket_push(e, bucket_of(&src[j], &e->last), src[j]);
    uint32_t next = e->chunk_next[c];
    chunk_free(e, c);
    c = next;
  }
  const hs_heap_entry *src = e->chunks + (size_t)c * HS_CHUNK;
  for (uint32_t j = 0; j < n; j++) bucket_push(e, bucket_of(&src[j], &e->last), src[j]);
  chunk_free(e, c);
}

int hs_engine_open(hs_engine **out, size_t max_pending, hs_diag *d) {
  *out = NULL;
  if (max_pending == 0) max_pending = HS_ENGINE_DEFAULT_MAX_PENDING;
  /* UINT32_MAX itself is the free-list terminator, so the last usable slot is one below it. */
  if (max_pending > (size_t)UINT32_MAX - 1) max_pending = (size_t)UINT32_MAX - 1;
  hs_engine *e = calloc(1, sizeof *e);
  if (!e) return hs_diag_set(d, HS_ENOMEM, "event engine: out of memory");
  e->max_pending = max_pending;
  e->free_head = HS_NO_SLOT;
  e->free_chunk = HS_NO_CHUNK;
  unsigned bits = 1;
  while (bits < 32 && ((size_t)1 << bits) < max_pending) bits++;
  e->slot_bits = bits;
  e->slot_mask = ((uint64_t)1 << bits) - 1;
  e->rank_limit = (uint64_t)1 << (64 - bits);
  *out = e;
  return 0;
}

void hs_engine_close(hs_engine *e) {
  if (!e) return;
  free(e->chunks);
  free(e->chunk_next);
  free(e->pool);
  free(e);
}

/* Makes room for one more pending event: doubles the pool (bounded by max_pending) when it is
 * full and grows the chunk store to chunks_needed(size + 1) (by doubling too), so that growth
 * costs amortized O(1). Then sets grow_at, the size up to which schedule needs neither. Changes
 * nothing the caller can observe on failure. */
static int engine_reserve(hs_engine *e, hs_diag *d) {
  if (e->size == e->cap) {
    size_t ncap = e->cap ? e->cap * 2 : HS_ENGINE_INITIAL_CAP;
    if (ncap > e->max_pending) ncap = e->max_pending;
    hs_payload *p = realloc(e->pool, ncap * sizeof *p);
    if (!p)
      return hs_diag_set(d, HS_ENOMEM,
                         "event engine: out of memory growing the queue to %zu events", ncap);
    e->pool = p;
    e->cap = ncap;
  }
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
  size_t most_by_chunks = (e->nchunks - HS_NBUCKETS - 2 + 1) * (size_t)HS_CHUNK - 1;
  e->grow_at = e->cap < most_by_chunks ? e->cap : most_by_chunks;
  return 0;
}

/* Gives the pending entries ranks 0..n-1 in their current order and rebuilds the buckets
 * around a last key of (now, 0), which is <= every pending key. O(n log n) once per
 * 2^(64 - slot_bits) schedules. */
static int engine_renumber(hs_engine *e, hs_diag *d) {
  size_t n = e->size;
  hs_heap_entry *all = malloc((n ? n : 1) * sizeof *all);
  if (!all)
    return hs_diag_set(d, HS_ENOMEM, "event engine: out of memory renumbering %zu events", n);
  size_t k = 0;
  for (unsigned b = 0; b < HS_NBUCKETS; b++) {
    if (e->bucket[b].count == 0) continue;
    uint32_t c, left;
    all[k++] = bucket_take(e, b, &c, &left);
    while (left > 0) {
      uint32_t m = left < HS_CHUNK ? left : HS_CHUNK;
      memcpy(all + k, e->chunks + (size_t)c * HS_CHUNK, m * sizeof *all);
      k += m;
      left -= m;
      uint32_t next = e->chunk_next[c];
      chunk_free(e, c);
      c = next;
    }
  }
  qsort(all, n, sizeof *all, entry_cmp);
  e->last = (hs_heap_entry){.tbits = time_bits(e->now + 0.0), .key = 0};
  for (size_t i = 0; i < n; i++) {
    all[i].key = ((uint64_t)i << e->slot_bits) | (all[i].key & e->slot_mask);
    bucket_push(e, bucket_of(&all[i], &e->last), all[i]);
  }
  e->next_rank = n;
  free(all);
  return 0;
}

void hs_engine_test_rank_limit(hs_engine *e, uint64_t limit) {
  if (limit > e->size && limit <= ((uint64_t)1 << (64 - e->slot_bits))) e->rank_limit = limit;
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
  if (e->next_rank >= e->rank_limit) {
    int rc = engine_renumber(e, d);
    if (rc) return rc;
  }

  uint32_t slot;
  if (e->free_head != HS_NO_SLOT) {
    slot = e->free_head;
    e->free_head = e->pool[slot].kind;
  } else {
    slot = (uint32_t)e->pool_hw++;
  }
  e->pool[slot] = (hs_payload){.seq = e->next_seq++, .arg = arg, .kind = kind, .worker = worker};

  /* Adding 0.0 turns -0.0 into +0.0, whose bits would otherwise sort after every positive time. */
  hs_heap_entry x = {.tbits = time_bits(time + 0.0),
                     .key = (e->next_rank++ << e->slot_bits) | slot};
  bucket_push(e, bucket_of(&x, &e->last), x);
  e->size++;
  return 0;
}

int hs_engine_pop(hs_engine *e, hs_event *out) {
  if (e->size == 0) return 0;
  uint32_t c, n;
  hs_heap_entry top = bucket_take(e, first_bucket(e), &c, &n);
  /* The other entries of that bucket agree with top in every digit above their level and
   * differ from it below, so each goes to a lower bucket, all of which are empty. */
  e->last = top;
  chunks_redistribute(e, c, n);
  e->size--;

  uint32_t slot = (uint32_t)(top.key & e->slot_mask);
  const hs_payload *p = &e->pool[slot];
  *out = (hs_event){.time = bits_time(top.tbits), .seq = p->seq, .kind = p->kind,
                    .worker = p->worker, .arg = p->arg};
  /* LIFO reuse keeps the most recently freed, cache-warm slot in play. */
  e->pool[slot].kind = e->free_head;
  e->free_head = slot;
  e->now = bits_time(top.tbits);
  e->processed++;
  return 1;
}

/* Reads the minimum of the first non-empty bucket without making it the last key: a later
 * schedule may still be earlier than it (though not earlier than now). */
int hs_engine_peek(const hs_engine *e, hs_event *out) {
  if (e->size == 0) return 0;
  const hs_heap_entry *t = &e->bucket[first_bucket(e)].min;
  const hs_payload *p = &e->pool[t->key & e->slot_mask];
  *out = (hs_event){.time = bits_time(t->tbits), .seq = p->seq, .kind = p->kind,
                    .worker = p->worker, .arg = p->arg};
  return 1;
}

double hs_engine_now(const hs_engine *e) { return e->now; }
size_t hs_engine_pending(const hs_engine *e) { return e->size; }
uint64_t hs_engine_processed(const hs_engine *e) { return e->processed; }
size_t hs_engine_max_pending(const hs_engine *e) { return e->max_pending; }
