/* The UDP hit path in C: one recvmmsg for up to BATCH datagrams, the stored answers found with the
 * same lookups nodedns/server.py's `_UDP.readable` makes, one sendmmsg for all the hits.
 *
 * serve(fd, table, allowed, counts, max_udp) -> (received, misses, send_errors)
 *
 *   fd        the listener's non-blocking UDP socket
 *   table     the hot dict (bytes key -> bytes stored response; byte 0 is its label slot)
 *   allowed   the allow list's memo: a set of client address strings
 *   counts    the listener's per-slot hit counters (a list of ints), incremented here
 *   max_udp   the server's largest UDP answer
 *
 * received    datagrams read (0: the queue was empty)
 * misses      None, or a list of (data, addr) the Python side takes on (clients not in `allowed`,
 *             queries that are not a byte-for-byte hit): `addr` as socket.recvfrom gives it
 * send_errors answers the kernel did not take (a full send buffer): dropped, the client asks again
 *
 * An error of recvmmsg other than EAGAIN raises OSError (an ICMP error queued on the socket: the
 * caller reads on). The GIL is held throughout (nothing here blocks), so the static buffers are
 * never used by two calls at once. Nothing is parsed beyond what the Python hit path reads: the
 * header's ARCOUNT low byte, and the 11 bytes of a bare OPT record at the end.
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
#define RECV_SIZE 65535

static unsigned char bufs[BATCH][RECV_SIZE];
static struct sockaddr_storage names[BATCH];
static struct iovec riov[BATCH];
static struct mmsghdr rmsgs[BATCH];
static struct iovec siov[BATCH][2];
static struct mmsghdr smsgs[BATCH];
static PyObject *held[BATCH]; /* the stored answers being sent: kept alive until sendmmsg returns */

static PyObject *ONE; /* the int 1, for the counters */
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

/* The stored response for the key `len` bytes at `start` (borrowed), or NULL. */
static PyObject *
stored(PyObject *table, const unsigned char *start, Py_ssize_t len)
{
    PyObject *w, *key = PyBytes_FromStringAndSize((const char *)start, len);
    if (!key)
        return NULL;
    w = PyDict_GetItemWithError(table, key);
    Py_DECREF(key);
    return (w && PyBytes_Check(w)) ? w : NULL;
}

/* The stored answer for a datagram, or NULL (borrowed; no exception unless one is set). */
static PyObject *
lookup(PyObject *table, const unsigned char *data, Py_ssize_t n, long max_udp)
{
    PyObject *w;
    Py_ssize_t wn;
    if (n <= 16)
        return NULL;
    if (data[11] == 0) { /* ARCOUNT low byte: no OPT, the key is the rest of the message */
        w = stored(table, data + 2, n - 2);
        return (w && PyBytes_GET_SIZE(w) > 512) ? NULL : w;
    }
    if (memcmp(data + n - 11, OPT_HEAD, 3) == 0 && memcmp(data + n - 6, OPT_PLAIN, 6) == 0) {
        long payload, limit;
        w = stored(table, data + 2, n - 13); /* a bare OPT at the end */
        if (!w)
            return NULL;
        wn = PyBytes_GET_SIZE(w);
        payload = ((long)data[n - 8] << 8) | data[n - 7];
        limit = payload < max_udp ? payload : max_udp;
        return (wn > 512 && wn > limit) ? NULL : w;
    }
    return NULL;
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

static int
add_miss(PyObject **misses, int i)
{
    PyObject *data, *addr, *pair;
    int rc;
    if (!*misses && !(*misses = PyList_New(0)))
        return -1;
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
    rc = PyList_Append(*misses, pair);
    Py_DECREF(pair);
    return rc;
}

static PyObject *
serve(PyObject *self, PyObject *args)
{
    int fd, received, i, hits = 0, sent = 0, errors = 0, last = -1, last_ok = 0;
    long max_udp;
    PyObject *table, *allowed, *counts, *misses = NULL, *result;
    (void)self;
    if (!PyArg_ParseTuple(args, "iO!O!O!l", &fd, &PyDict_Type, &table, &PySet_Type, &allowed, &PyList_Type, &counts,
                          &max_udp))
        return NULL;
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
        Py_ssize_t n = (Py_ssize_t)rmsgs[i].msg_len;
        PyObject *w;
        int ok;
        if (last >= 0 && same_host(&names[i], &names[last])) {
            ok = last_ok; /* the set cannot change while we hold the GIL */
        } else {
            PyObject *who = host(&names[i]);
            if (!who)
                goto fail;
            ok = PySet_Contains(allowed, who);
            Py_DECREF(who);
            if (ok < 0)
                goto fail;
            last = i;
            last_ok = ok;
        }
        w = ok ? lookup(table, data, n, max_udp) : NULL;
        if (PyErr_Occurred())
            goto fail;
        if (!w) {
            if (add_miss(&misses, i) < 0)
                goto fail;
            continue;
        }
        if (count(counts, w) < 0)
            goto fail;
        Py_INCREF(w);
        held[hits] = w;
        siov[hits][0].iov_base = (void *)data; /* the query's ID */
        siov[hits][0].iov_len = 2;
        siov[hits][1].iov_base = PyBytes_AS_STRING(w) + 2;
        siov[hits][1].iov_len = (size_t)PyBytes_GET_SIZE(w) - 2;
        memset(&smsgs[hits].msg_hdr, 0, sizeof smsgs[hits].msg_hdr);
        smsgs[hits].msg_hdr.msg_name = &names[i];
        smsgs[hits].msg_hdr.msg_namelen = rmsgs[i].msg_hdr.msg_namelen;
        smsgs[hits].msg_hdr.msg_iov = siov[hits];
        smsgs[hits].msg_hdr.msg_iovlen = 2;
        hits++;
    }
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
    result = Py_BuildValue("(iOi)", received, misses ? misses : Py_None, errors);
    Py_XDECREF(misses);
    return result;

fail:
    for (i = 0; i < hits; i++)
        Py_DECREF(held[i]);
    Py_XDECREF(misses);
    return NULL;
}

static PyMethodDef methods[] = {
    {"serve", serve, METH_VARARGS, "Read up to BATCH datagrams, answer the hits, return the rest."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "nodedns._hitpath", "The UDP hit path in C (see nodedns/_hitpath.c).", -1, methods,
    NULL, NULL, NULL, NULL,
};

PyMODINIT_FUNC
PyInit__hitpath(void)
{
    PyObject *m;
    if (!ONE && !(ONE = PyLong_FromLong(1)))
        return NULL;
    m = PyModule_Create(&module);
    if (m && PyModule_AddIntConstant(m, "BATCH", BATCH) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
