/* The UDP hit path in C: one recvmmsg for up to BATCH datagrams, the stored answers found with the
 * same lookups and steps as the Python one (nodedns/serve/hitpath.py, `serve`), one sendmmsg for all the hits.
 *
 * serve(fd, table, allowed, counts, max_udp[, tally[, rate_limit[, on_full[, policed[, second[, asked]]]]]])
 *     -> (received, misses, send_errors)
 *
 *   fd        the listener's non-blocking UDP socket
 *   table     the hot dict (bytes key -> bytes stored response; byte 0 is its label slot)
 *   allowed   the allow list's memo: a set of client address strings
 *   counts    the listener's per-slot hit counters (a list of ints), incremented here
 *   max_udp   the server's largest UDP answer
 *   tally     None, or insight's counts of this interval (nodedns.serve.tally.Tally.hits): a dict of
 *             client address -> {stored answer: count}, one more per hit, as Tally.hit counts:
 *             at most TALLY_CLIENTS addresses (further ones share the "" entry), at most
 *             TALLY_ANSWERS stored answers per address (nodedns.serve.tally.count_hit); a hit of a
 *             new answer for a client whose entry is full is counted here by its label slot when
 *             the entry is marked (a None key: tally.BY_SLOT), else goes to `on_full`
 *   on_full   None, or Tally.hit: called (address, stored answer) for a hit of a new answer for a
 *             client whose tally entry is full and unmarked (it sets the entry aside, or marks it
 *             and counts the hit by its label slot), then the hit is answered here; without it such a hit is handed back
 *             with the misses (the Python path answers it and calls Tally.hit)
 *   policed   None, or the admitted clients under a DNS policy (nodedns.serve.limits.AllowList.policed_hits):
 *             address -> its policy group's memo (nodedns.policy.book), key -> (True, or the stored
 *             answer checked; [count]). Looked up only for a client not in `allowed` (once per run
 *             of datagrams from one address): its datagram is answered as an allowed client's is
 *             only when the memo's entry for its key lets the stored answer through (True: any
 *             stored answer; else that very object), the entry's count one more per answer sent;
 *             anything else is handed back
 *   rate_limit None, or the rate limit (nodedns.serve.limits.RateLimiter) as a tuple (rl, rate, max_clients,
 *             over): `rl` the limiter's counts of the current window (client address -> responses),
 *             `over` a list. Before anything else, each datagram of a client under its budget
 *             (rl[client] < rate) adds one to rl[client] and goes on as without a limit; one of a
 *             client at its budget, or of a new client while rl holds max_clients already, is
 *             appended to `over` as (data, addr), not counted: the Python side hands it to
 *             RateLimiter.take, which counts it and decides slip or drop. rl is read once and
 *             written once per run of datagrams from one address (the allow list's memo likewise)
 *
 *   second    the forward cache's clock second (nodedns.dns.hot): a stored answer whose byte 1 is TTL_FLAG is
 *             a template, a trailer after its message (the TTL offsets, two bytes each, its expiry second,
 *             how many offsets): it is copied, every TTL set to expiry - second, and sent; one whose
 *             expiry second has come is handed back with the misses
 *   asked     None, or a set: every template answered is added to it (the forward cache refreshes ahead
 *             what was asked, nodedns.forward.store.ForwardCache.asked)
 *
 * received    datagrams read (0: the queue was empty)
 * misses      None, or a list of (data, addr) the Python side takes on (clients not in `allowed`,
 *             queries that are not a byte-for-byte hit, hits that do not fit the tally): `addr` as
 *             socket.recvfrom gives it; with a limit, each was counted in rl already
 * send_errors answers the kernel did not take (a full send buffer): dropped, the client asks again
 *
 * The misses handed back meet the miss budget (nodedns.serve.limits.MissBudget, --miss-limit) in
 * nodedns.serve.udp.UDPListener.general, after the canonical-key lookup and before the slow path: the
 * same place for both hit paths, so they shed alike and a client's hits are answered here whatever
 * its misses.
 *
 * An error of recvmmsg other than EAGAIN raises OSError (an ICMP error queued on the socket: the
 * caller reads on). Any error raised after the datagrams were read loses the batch: no hit is sent,
 * the misses and `over` are not handed back (the caller clears `over`), and the counts of the runs
 * already written back in rl stay (the clients ask again). The GIL is held throughout (nothing here blocks), so the static buffers are
 * never used by two calls at once. Nothing of the query is parsed beyond what the Python hit path
 * reads: the header's ARCOUNT, and the 11 bytes of a bare OPT record at the end.
 *
 * A stored answer larger than the client's UDP size (512 without EDNS, else its payload size
 * capped by max_udp, never below 512) is sent cut the way wire.truncate (miekg/dns Msg.Truncate)
 * cuts it: as many whole records as fit, answer section first, then authority, then additional,
 * the OPT record kept last, TC=1. The cut is found by walking the stored records (`cut`); the reply
 * goes out as four pieces: the query's ID, the new header, the records kept, the OPT.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <arpa/inet.h>
#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <string.h>
#include <sys/socket.h>

#define BATCH 64
#define TTL_FLAG 1 /* byte 1 of a template (nodedns.dns.hot.TTL_FLAG) */
#define RECV_SIZE 65535

static unsigned char bufs[BATCH][RECV_SIZE];
static struct sockaddr_storage names[BATCH];
static struct iovec riov[BATCH];
static struct mmsghdr rmsgs[BATCH];
static struct iovec siov[BATCH][4];
static unsigned char heads[BATCH][10]; /* header bytes 2..11 of a truncated answer */
static struct mmsghdr smsgs[BATCH];
static PyObject *held[BATCH]; /* the stored answers being sent (a template's copy): kept alive until sendmmsg returns */

static PyObject *ONE; /* the int 1, for the counters */
static PyObject *OVERFLOW; /* "": the tally entry of the addresses beyond TALLY_CLIENTS */

#define TALLY_CLIENTS 512 /* nodedns.serve.tally.MAX_CLIENTS */
#define TALLY_ANSWERS 64  /* nodedns.serve.tally.MAX_ANSWERS */
static const unsigned char OPT_HEAD[3] = {0, 0, 41};
static const unsigned char OPT_PLAIN[6] = {0, 0, 0, 0, 0, 0};

/* The client's address as text, as socket.recvfrom spells it: for IPv6 with a scope (link-local),
 * getnameinfo's "fe80::1%eth0"; else inet_ntop. 0 on success. */
static int
host_text(const struct sockaddr_storage *ss, char *text, size_t size)
{
    if (ss->ss_family == AF_INET)
        return inet_ntop(AF_INET, &((const struct sockaddr_in *)ss)->sin_addr, text, (socklen_t)size) ? 0 : -1;
    if (ss->ss_family == AF_INET6) {
        const struct sockaddr_in6 *sin6 = (const struct sockaddr_in6 *)ss;
        if (sin6->sin6_scope_id != 0)
            return getnameinfo((const struct sockaddr *)sin6, sizeof *sin6, text, (socklen_t)size, NULL, 0,
                               NI_NUMERICHOST) == 0 ? 0 : -1;
        return inet_ntop(AF_INET6, &sin6->sin6_addr, text, (socklen_t)size) ? 0 : -1;
    }
    errno = EAFNOSUPPORT;
    return -1;
}

static PyObject *
address(const struct sockaddr_storage *ss)
{
    char text[NI_MAXHOST];
    if (host_text(ss, text, sizeof text) < 0)
        return PyErr_SetFromErrno(PyExc_OSError);
    if (ss->ss_family == AF_INET) {
        const struct sockaddr_in *sin = (const struct sockaddr_in *)ss;
        return Py_BuildValue("(si)", text, (int)ntohs(sin->sin_port));
    }
    if (ss->ss_family == AF_INET6) {
        const struct sockaddr_in6 *sin6 = (const struct sockaddr_in6 *)ss;
        return Py_BuildValue("(siII)", text, (int)ntohs(sin6->sin6_port),
                             (unsigned int)ntohl(sin6->sin6_flowinfo), (unsigned int)sin6->sin6_scope_id);
    }
    PyErr_SetString(PyExc_OSError, "unexpected address family");
    return NULL;
}

/* The client's address string, for the allow list (NULL with an exception set). */
static PyObject *
host(const struct sockaddr_storage *ss)
{
    char text[NI_MAXHOST];
    if (host_text(ss, text, sizeof text) < 0)
        return PyErr_SetFromErrno(PyExc_OSError);
    return PyUnicode_FromString(text);
}

static int
same_host(const struct sockaddr_storage *a, const struct sockaddr_storage *b)
{
    if (a->ss_family != b->ss_family)
        return 0;
    if (a->ss_family == AF_INET)
        return memcmp(&((const struct sockaddr_in *)a)->sin_addr, &((const struct sockaddr_in *)b)->sin_addr,
                      sizeof(struct in_addr)) == 0;
    if (a->ss_family == AF_INET6)
        return memcmp(&((const struct sockaddr_in6 *)a)->sin6_addr, &((const struct sockaddr_in6 *)b)->sin6_addr,
                      sizeof(struct in6_addr)) == 0 &&
               ((const struct sockaddr_in6 *)a)->sin6_scope_id == ((const struct sockaddr_in6 *)b)->sin6_scope_id;
    return 0;
}

/* The stored response for the key `len` bytes at `start` (borrowed), or NULL. With `memo` (a client
 * under a DNS policy: its group's memo, key -> (True or the stored answer checked, [count])), only a
 * response the memo's entry lets through (True: any; else that very object), its entry's count list
 * in *cell (a new reference). */
static PyObject *
stored(PyObject *table, const unsigned char *start, Py_ssize_t len, PyObject *memo, PyObject **cell)
{
    PyObject *w, *e, *ok, *key = PyBytes_FromStringAndSize((const char *)start, len);
    if (!key)
        return NULL;
    w = PyDict_GetItemWithError(table, key);
    if (w && !PyBytes_Check(w))
        w = NULL;
    if (w && memo) {
        e = PyDict_GetItemWithError(memo, key); /* the key's hash is cached from the lookup above */
        if (e && PyTuple_Check(e) && PyTuple_GET_SIZE(e) == 2 && PyList_Check(PyTuple_GET_ITEM(e, 1))
            && PyList_GET_SIZE(PyTuple_GET_ITEM(e, 1)) == 1
            && ((ok = PyTuple_GET_ITEM(e, 0)) == Py_True || ok == w)) {
            *cell = PyTuple_GET_ITEM(e, 1);
            Py_INCREF(*cell);
        } else {
            w = NULL; /* not held, or rendered again since it was checked: the resolver decides */
        }
    }
    Py_DECREF(key);
    return w;
}

/* The stored answer for a datagram, or NULL (borrowed; no exception unless one is set). `qend`
 * gets where the question ends (in the query and in the stored answer alike), `limit` the largest
 * reply this client may get over UDP; `memo` and `cell` as for `stored`. */
static PyObject *
lookup(PyObject *table, const unsigned char *data, Py_ssize_t n, long max_udp, Py_ssize_t *qend, long *limit,
       PyObject *memo, PyObject **cell)
{
    if (n <= 16)
        return NULL;
    if (data[11] == 0) { /* ARCOUNT low byte: no OPT, the key is the rest of the message */
        *qend = n;
        *limit = 512;
        return stored(table, data + 2, n - 2, memo, cell);
    }
    /* a bare OPT at the end, and an ARCOUNT high byte of 0 (a key with it set stands for DO) */
    if (data[10] == 0 && memcmp(data + n - 11, OPT_HEAD, 3) == 0 && memcmp(data + n - 6, OPT_PLAIN, 6) == 0) {
        long payload = ((long)data[n - 8] << 8) | data[n - 7];
        *qend = n - 11;
        *limit = payload < max_udp ? payload : max_udp;
        if (*limit < 512)
            *limit = 512;
        return stored(table, data + 2, n - 13, memo, cell);
    }
    return NULL;
}

/* A template (nodedns.dns.hot.with_ttls) as sent in `second`: a new bytes object of its message with byte
 * 1 cleared and every TTL set to expiry - second; NULL (no exception) when its expiry second has come or
 * its trailer does not hold (handed back), NULL with an exception when out of memory. */
static PyObject *
live(PyObject *t, long second)
{
    const unsigned char *w = (const unsigned char *)PyBytes_AS_STRING(t);
    Py_ssize_t wn = PyBytes_GET_SIZE(t), n, end, i;
    long expires, ttl;
    PyObject *copy;
    unsigned char *out;
    if (wn < 12 + 6)
        return NULL;
    n = ((Py_ssize_t)w[wn - 2] << 8) | w[wn - 1];
    expires = (long)(int32_t)(((uint32_t)w[wn - 6] << 24) | ((uint32_t)w[wn - 5] << 16) | ((uint32_t)w[wn - 4] << 8)
                              | w[wn - 3]);
    end = wn - 6 - 2 * n;
    if (end < 12 || expires <= second)
        return NULL;
    for (i = end; i < end + 2 * n; i += 2)
        if ((((Py_ssize_t)w[i] << 8) | w[i + 1]) + 4 > end)
            return NULL;
    ttl = expires - second;
    copy = PyBytes_FromStringAndSize((const char *)w, end); /* new, not yet shared: written in place */
    if (!copy)
        return NULL;
    out = (unsigned char *)PyBytes_AS_STRING(copy);
    out[1] = 0;
    for (i = end; i < end + 2 * n; i += 2) {
        Py_ssize_t off = ((Py_ssize_t)w[i] << 8) | w[i + 1];
        out[off] = (unsigned char)(ttl >> 24);
        out[off + 1] = (unsigned char)(ttl >> 16);
        out[off + 2] = (unsigned char)(ttl >> 8);
        out[off + 3] = (unsigned char)ttl;
    }
    return copy;
}

/* The end of the name at `pos` in w (labels, or a compression pointer), or -1. */
static Py_ssize_t
skip_name(const unsigned char *w, Py_ssize_t wn, Py_ssize_t pos)
{
    while (pos < wn) {
        unsigned char len = w[pos];
        if (len == 0)
            return pos + 1;
        if ((len & 0xC0) == 0xC0)
            return pos + 2 <= wn ? pos + 2 : -1;
        if (len > 63)
            return -1;
        pos += len + 1;
    }
    return -1;
}

/* A stored answer of `wn` bytes cut to `limit` (see wire.truncate): the end of the records kept,
 * the new header bytes 2..11 in `head`, the OPT record's offset and length (0: none). -1 when the
 * records cannot be walked (the caller hands the datagram to the Python path). */
static Py_ssize_t
cut(const unsigned char *w, Py_ssize_t wn, Py_ssize_t qend, long limit, unsigned char *head, Py_ssize_t *opt_at,
    Py_ssize_t *opt_len)
{
    unsigned int counts[3], kept[3] = {0, 0, 0}, total, i;
    Py_ssize_t pos = qend, start, end, at = qend, budget;
    counts[0] = ((unsigned int)w[6] << 8) | w[7];
    counts[1] = ((unsigned int)w[8] << 8) | w[9];
    counts[2] = ((unsigned int)w[10] << 8) | w[11];
    total = counts[0] + counts[1] + counts[2];
    *opt_at = 0;
    *opt_len = 0;
    /* first the OPT record: its length comes off the budget */
    for (i = 0; i < total; i++) {
        start = pos;
        if ((pos = skip_name(w, wn, pos)) < 0 || pos + 10 > wn)
            return -1;
        end = pos + 10 + (((Py_ssize_t)w[pos + 8] << 8) | w[pos + 9]);
        if (end > wn)
            return -1;
        if (i >= counts[0] + counts[1] && w[pos] == 0 && w[pos + 1] == 41 && !*opt_len) {
            *opt_at = start;
            *opt_len = end - start;
        }
        pos = end;
    }
    budget = (Py_ssize_t)limit - *opt_len;
    /* then as many whole records as fit, in order; the first that does not ends the message */
    pos = qend;
    for (i = 0; i < total; i++) {
        if (*opt_len && pos == *opt_at)
            break; /* records after an OPT in the middle would move: the OPT ends what is kept */
        pos = skip_name(w, wn, pos); /* walked above: cannot fail */
        end = pos + 10 + (((Py_ssize_t)w[pos + 8] << 8) | w[pos + 9]);
        if (end > budget)
            break;
        kept[i < counts[0] ? 0 : (i < counts[0] + counts[1] ? 1 : 2)]++;
        pos = at = end;
    }
    head[0] = w[2] | (kept[0] + kept[1] + kept[2] < total - (*opt_len ? 1 : 0) ? 0x02 : 0); /* TC */
    head[1] = w[3];
    head[2] = 0;
    head[3] = 1;
    head[4] = (unsigned char)(kept[0] >> 8);
    head[5] = (unsigned char)kept[0];
    head[6] = (unsigned char)(kept[1] >> 8);
    head[7] = (unsigned char)kept[1];
    kept[2] += *opt_len ? 1 : 0;
    head[8] = (unsigned char)(kept[2] >> 8);
    head[9] = (unsigned char)kept[2];
    return at;
}

/* One more in the one-item list `cell` (a memo entry's count of the questions it answered). */
static int
bump(PyObject *cell)
{
    PyObject *old = PyList_GET_ITEM(cell, 0), *one = PyNumber_Add(old, ONE);
    if (!one)
        return -1;
    PyList_SET_ITEM(cell, 0, one);
    Py_DECREF(old);
    return 0;
}

static int
count(PyObject *counts, PyObject *w)
{
    Py_ssize_t slot;
    PyObject *old, *one;
    if (PyBytes_GET_SIZE(w) < 12)
        return 0;
    slot = (unsigned char)PyBytes_AS_STRING(w)[0];
    if (slot >= PyList_GET_SIZE(counts))
        return 0;
    old = PyList_GET_ITEM(counts, slot);
    one = PyNumber_Add(old, ONE);
    if (!one)
        return -1;
    PyList_SET_ITEM(counts, slot, one);
    Py_DECREF(old);
    return 0;
}

/* Append datagram i to `list` as (data, addr). */
static int
add_datagram(PyObject *list, int i)
{
    PyObject *data, *addr, *pair;
    int rc;
    data = PyBytes_FromStringAndSize((const char *)bufs[i], (Py_ssize_t)rmsgs[i].msg_len);
    if (!data)
        return -1;
    addr = address(&names[i]);
    if (!addr) {
        Py_DECREF(data);
        return -1;
    }
    pair = PyTuple_Pack(2, data, addr);
    Py_DECREF(data);
    Py_DECREF(addr);
    if (!pair)
        return -1;
    rc = PyList_Append(list, pair);
    Py_DECREF(pair);
    return rc;
}

static int
add_miss(PyObject **misses, int i)
{
    if (!*misses && !(*misses = PyList_New(0)))
        return -1;
    return add_datagram(*misses, i);
}

/* The rate limit's count of client `who` this window into *n; *full 1 when it has none and the table
 * is full (the datagrams go to RateLimiter.take, which shares the overflow budget). 0, or -1 on error. */
static int
rl_read(PyObject *rl, PyObject *who, long max_clients, long *n, int *full)
{
    PyObject *v = PyDict_GetItemWithError(rl, who);
    *n = 0;
    *full = 0;
    if (!v) {
        if (PyErr_Occurred())
            return -1;
        *full = PyDict_GET_SIZE(rl) >= max_clients;
        return 0;
    }
    *n = PyLong_AsLong(v);
    if (*n == -1 && PyErr_Occurred())
        return -1;
    return 0;
}

/* rl[who] = n (the count of a run of datagrams from one address). 0, or -1 on error. */
static int
rl_write(PyObject *rl, PyObject *who, long n)
{
    int rc;
    PyObject *v = PyLong_FromLong(n);
    if (!v)
        return -1;
    rc = PyDict_SetItem(rl, who, v);
    Py_DECREF(v);
    return rc;
}

/* The tally entry of client `who` (borrowed; created, or the OVERFLOW one beyond TALLY_CLIENTS). */
static PyObject *
tally_client(PyObject *tally, PyObject *who)
{
    PyObject *cd = PyDict_GetItemWithError(tally, who);
    if (cd || PyErr_Occurred())
        return cd;
    if (PyDict_GET_SIZE(tally) >= TALLY_CLIENTS) {
        who = OVERFLOW;
        cd = PyDict_GetItemWithError(tally, who);
        if (cd || PyErr_Occurred())
            return cd;
    }
    cd = PyDict_New();
    if (!cd)
        return NULL;
    if (PyDict_SetItem(tally, who, cd) < 0) {
        Py_DECREF(cd);
        return NULL;
    }
    Py_DECREF(cd); /* the tally holds it */
    return cd;
}

/* One more answer sent from the stored bytes `w` in a client's tally entry `cd` (tally.count_hit): 0,
 * or 1 when the entry is full, not marked BY_SLOT and `w` new to it (not counted: Tally.hit sets the
 * full entry aside or marks it), -1 on error. A marked entry counts a new answer by its label slot
 * (byte 0 of the stored answer). */
static int
tally_hit(PyObject *cd, PyObject *w)
{
    PyObject *key = w, *old, *now;
    int rc;
    old = PyDict_GetItemWithError(cd, w);
    if (!old && PyErr_Occurred())
        return -1;
    if (old || PyDict_GET_SIZE(cd) < TALLY_ANSWERS) {
        Py_INCREF(key); /* counted under the answer itself */
    } else {
        rc = PyDict_Contains(cd, Py_None); /* tally.BY_SLOT */
        if (rc <= 0)
            return rc < 0 ? -1 : 1;
        key = PyLong_FromLong((long)((const unsigned char *)PyBytes_AS_STRING(w))[0]); /* the label slot */
        if (!key)
            return -1;
        old = PyDict_GetItemWithError(cd, key);
        if (!old && PyErr_Occurred()) {
            Py_DECREF(key);
            return -1;
        }
    }
    now = old ? PyNumber_Add(old, ONE) : (Py_INCREF(ONE), ONE);
    rc = now ? PyDict_SetItem(cd, key, now) : -1;
    Py_XDECREF(now);
    Py_DECREF(key);
    return rc;
}

static PyObject *
serve(PyObject *self, PyObject *args)
{
    int fd, received, i, hits = 0, sent = 0, errors = 0, last = -1, last_ok = 0, full;
    long max_udp, second = 0;
    PyObject *table, *allowed, *counts, *tally = Py_None, *rate_limit = Py_None, *on_full = Py_None, *misses = NULL;
    PyObject *policed = Py_None, *asked = Py_None;
    PyObject *result;
    PyObject *who = NULL; /* the address of datagram `last` (owned) */
    PyObject *memo = NULL; /* its group's memo when it is not in `allowed` and under a DNS policy (owned) */
    PyObject *cell = NULL; /* the memo entry's count of the datagram being answered (owned) */
    PyObject *copy = NULL; /* a template's message with its TTLs set, to be sent (owned) */
    PyObject *cd = NULL;  /* its tally entry (borrowed: the tally holds it), looked up at its first hit */
    PyObject *rl = NULL, *over = NULL; /* the rate limit's counts and the list of clients over it */
    long rate = 0, max_clients = 0;
    long rl_n = 0;  /* the count of the client of datagram `last`, not written back while rl_dirty */
    int rl_full = 0, rl_dirty = 0;
    (void)self;
    if (!PyArg_ParseTuple(args, "iO!O!O!l|OOOOlO", &fd, &PyDict_Type, &table, &PySet_Type, &allowed, &PyList_Type,
                          &counts, &max_udp, &tally, &rate_limit, &on_full, &policed, &second, &asked))
        return NULL;
    if (asked == Py_None) {
        asked = NULL;
    } else if (!PySet_Check(asked)) {
        PyErr_SetString(PyExc_TypeError, "asked must be a set or None");
        return NULL;
    }
    if (policed == Py_None) {
        policed = NULL;
    } else if (!PyDict_Check(policed)) {
        PyErr_SetString(PyExc_TypeError, "policed must be a dict or None");
        return NULL;
    }
    if (on_full == Py_None) {
        on_full = NULL;
    } else if (!PyCallable_Check(on_full)) {
        PyErr_SetString(PyExc_TypeError, "on_full must be callable or None");
        return NULL;
    }
    if (tally == Py_None) {
        tally = NULL;
    } else if (!PyDict_Check(tally)) {
        PyErr_SetString(PyExc_TypeError, "tally must be a dict or None");
        return NULL;
    }
    if (rate_limit != Py_None) {
        if (!PyArg_ParseTuple(rate_limit, "O!llO!;rate_limit must be None or (dict, rate, max_clients, list)",
                              &PyDict_Type, &rl, &rate, &max_clients, &PyList_Type, &over))
            return NULL;
    }
    for (i = 0; i < BATCH; i++) {
        riov[i].iov_base = bufs[i];
        riov[i].iov_len = RECV_SIZE;
        memset(&rmsgs[i].msg_hdr, 0, sizeof rmsgs[i].msg_hdr);
        rmsgs[i].msg_hdr.msg_name = &names[i];
        rmsgs[i].msg_hdr.msg_namelen = sizeof names[i];
        rmsgs[i].msg_hdr.msg_iov = &riov[i];
        rmsgs[i].msg_hdr.msg_iovlen = 1;
    }
    do {
        received = recvmmsg(fd, rmsgs, BATCH, MSG_DONTWAIT, NULL);
    } while (received < 0 && errno == EINTR);
    if (received < 0) {
        if (errno == EAGAIN || errno == EWOULDBLOCK)
            return Py_BuildValue("(iOi)", 0, Py_None, 0);
        return PyErr_SetFromErrno(PyExc_OSError);
    }
    for (i = 0; i < received; i++) {
        const unsigned char *data = bufs[i];
        Py_ssize_t n = (Py_ssize_t)rmsgs[i].msg_len, qend = 0, wn, end = 0, opt_at = 0, opt_len = 0;
        long limit = 512;
        int template = 0;
        PyObject *w;
        const unsigned char *wb;
        int ok;
        Py_CLEAR(cell);
        if (last >= 0 && same_host(&names[i], &names[last])) {
            ok = last_ok; /* the set cannot change while we hold the GIL */
        } else {
            if (rl_dirty && rl_write(rl, who, rl_n) < 0)
                goto fail;
            rl_dirty = 0;
            Py_XDECREF(who);
            Py_CLEAR(memo);
            cd = NULL;
            who = host(&names[i]);
            if (!who)
                goto fail;
            ok = PySet_Contains(allowed, who);
            if (ok < 0)
                goto fail;
            if (!ok && policed) { /* only a client not in the allow list's memo: under a DNS policy? */
                memo = PyDict_GetItemWithError(policed, who);
                if (!memo && PyErr_Occurred())
                    goto fail;
                if (memo && PyDict_Check(memo))
                    Py_INCREF(memo);
                else
                    memo = NULL;
            }
            if (rl && rl_read(rl, who, max_clients, &rl_n, &rl_full) < 0)
                goto fail;
            last = i;
            last_ok = ok;
        }
        if (rl) { /* the rate limit first, as for any reply (refused clients too) */
            if (rl_full || rl_n >= rate) {
                if (add_datagram(over, i) < 0)
                    goto fail;
                continue;
            }
            rl_n++;
            rl_dirty = 1;
        }
        w = ok ? lookup(table, data, n, max_udp, &qend, &limit, NULL, &cell)
               : memo ? lookup(table, data, n, max_udp, &qend, &limit, memo, &cell) : NULL;
        if (PyErr_Occurred())
            goto fail;
        if (w) {
            wb = (const unsigned char *)PyBytes_AS_STRING(w);
            wn = PyBytes_GET_SIZE(w);
            if (wn > 1 && wb[1] == TTL_FLAG) {
                template = 1;
                copy = live(w, second);
                if (!copy && PyErr_Occurred())
                    goto fail;
                if (copy) {
                    wb = (const unsigned char *)PyBytes_AS_STRING(copy);
                    wn = PyBytes_GET_SIZE(copy);
                } else {
                    wn = -1; /* expired: handed back */
                }
            }
            if (wn < qend)
                w = NULL;
            else if (wn > limit && (end = cut(wb, wn, qend, limit, heads[hits], &opt_at, &opt_len)) < 0)
                w = NULL; /* not walkable (never for what we store): the Python path decides */
        }
        if (!w) {
            Py_CLEAR(copy);
            if (add_miss(&misses, i) < 0)
                goto fail;
            continue;
        }
        if (tally) {
            if (!cd && !(cd = tally_client(tally, who)))
                goto fail;
            full = tally_hit(cd, w);
            if (full < 0)
                goto fail;
            if (full && on_full) { /* Tally.hit sets the client's full entry aside (or counts by slot) */
                PyObject *r;
                Py_INCREF(w); /* borrowed from the table: held while Python code runs */
                r = PyObject_CallFunctionObjArgs(on_full, who, w, NULL);
                Py_DECREF(w);
                if (!r)
                    goto fail;
                Py_DECREF(r);
                cd = NULL; /* the client's entry may be a fresh one now: looked up again */
            } else if (full) { /* the Python path answers it and sets the client's full entry aside */
                Py_CLEAR(copy);
                if (add_miss(&misses, i) < 0)
                    goto fail;
                continue;
            }
        }
        if (count(counts, w) < 0)
            goto fail;
        if (template && asked && PySet_Add(asked, w) < 0)
            goto fail;
        if (cell && bump(cell) < 0)
            goto fail;
        if (copy) {
            held[hits] = copy; /* its reference passes to `held` */
            copy = NULL;
        } else {
            Py_INCREF(w);
            held[hits] = w;
        }
        memset(&smsgs[hits].msg_hdr, 0, sizeof smsgs[hits].msg_hdr);
        smsgs[hits].msg_hdr.msg_name = &names[i];
        smsgs[hits].msg_hdr.msg_namelen = rmsgs[i].msg_hdr.msg_namelen;
        smsgs[hits].msg_hdr.msg_iov = siov[hits];
        siov[hits][0].iov_base = (void *)data; /* the query's ID */
        siov[hits][0].iov_len = 2;
        if (wn <= limit) { /* the stored answer as it is */
            siov[hits][1].iov_base = (void *)(wb + 2);
            siov[hits][1].iov_len = (size_t)wn - 2;
            smsgs[hits].msg_hdr.msg_iovlen = 2;
        } else { /* cut: new header, the records kept, the OPT */
            siov[hits][1].iov_base = heads[hits];
            siov[hits][1].iov_len = 10;
            siov[hits][2].iov_base = (void *)(wb + 12);
            siov[hits][2].iov_len = (size_t)(end - 12);
            siov[hits][3].iov_base = (void *)(wb + opt_at);
            siov[hits][3].iov_len = (size_t)opt_len;
            smsgs[hits].msg_hdr.msg_iovlen = 4;
        }
        hits++;
    }
    Py_CLEAR(cell);
    if (rl_dirty && rl_write(rl, who, rl_n) < 0)
        goto fail;
    while (sent < hits) {
        int r = sendmmsg(fd, &smsgs[sent], (unsigned int)(hits - sent), 0);
        if (r > 0) {
            sent += r;
        } else if (r < 0 && errno == EINTR) {
            continue;
        } else {
            errors++; /* this one is not taken (a full buffer, an unreachable client): skip it */
            sent++;
        }
    }
    for (i = 0; i < hits; i++)
        Py_DECREF(held[i]);
    Py_XDECREF(who);
    Py_XDECREF(memo);
    result = Py_BuildValue("(iOi)", received, misses ? misses : Py_None, errors);
    Py_XDECREF(misses);
    return result;

fail:
    Py_XDECREF(copy);
    for (i = 0; i < hits; i++)
        Py_DECREF(held[i]);
    Py_XDECREF(who);
    Py_XDECREF(memo);
    Py_XDECREF(cell);
    Py_XDECREF(misses);
    return NULL;
}

static PyMethodDef methods[] = {
    {"serve", serve, METH_VARARGS, "Read up to BATCH datagrams, answer the hits (counted in the tally when given), "
                                   "return the rest."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "nodedns.serve._hitpath", "The UDP hit path in C (see nodedns/serve/_hitpath.c).", -1, methods,
    NULL, NULL, NULL, NULL,
};

PyMODINIT_FUNC
PyInit__hitpath(void)
{
    PyObject *m;
    if (!ONE && !(ONE = PyLong_FromLong(1)))
        return NULL;
    if (!OVERFLOW && !(OVERFLOW = PyUnicode_FromString("")))
        return NULL;
    m = PyModule_Create(&module);
    if (m && (PyModule_AddIntConstant(m, "BATCH", BATCH) < 0 || PyModule_AddIntConstant(m, "TALLY_CLIENTS", TALLY_CLIENTS) < 0
              || PyModule_AddIntConstant(m, "TALLY_ANSWERS", TALLY_ANSWERS) < 0)) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
