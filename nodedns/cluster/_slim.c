/* The endpoint columns of an EndpointSlice of the common shape, in C (optional: the loop of
 * nodedns/cluster/objects/endpointslice.py does the same without it, and decides every endpoint this function
 * declines).
 *
 * common_columns(endpoints, v6) -> (addrs, ready, hostnames, pod_names, nodes, zones) | None
 *
 * `endpoints` is the decoded JSON list of a slice. Every endpoint must be of the common shape, else the
 * answer is None and the Python loop takes the whole slice, with its messages for what is wrong:
 *   - a dict; `addresses` a list of exactly one str, an address of the slice's family in canonical text
 *     (what inet_ntop prints back; IPv6 addresses whose first 80 bits are zero go to Python, which
 *     prints the IPv4-compatible and -mapped forms as ipaddress does);
 *   - `conditions` absent or a dict (ready: absent or null is ready, else its truth);
 *   - `hostname` absent or false, or an ASCII str that is a DNS-1123 label once lower-cased;
 *   - `targetRef` absent or a dict (a Pod's `name`, lower-cased, when `kind` is absent or "Pod";
 *     a name that is no str, or another kind, is no Pod name); a non-ASCII name goes to Python;
 *   - `nodeName` and `zone` absent or false, or a str (interned, as the Python loop does);
 *   - no `hints` (or false).
 * The results are those the Python loop builds for the same endpoints (tests/unit/cluster/
 * test_slim_c.py compares the two on generated slices).
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <arpa/inet.h>
#include <string.h>

static PyObject *k_addresses, *k_conditions, *k_ready, *k_hostname, *k_target_ref, *k_kind, *k_name,
    *k_node_name, *k_zone, *k_hints, *s_pod, *s_empty;

/* The packed address of `text` when it is a canonical address of the family, else 0. */
static int pack_canonical(PyObject *text, int v6, unsigned char *out) {
    Py_ssize_t n;
    const char *s = PyUnicode_AsUTF8AndSize(text, &n);
    char back[INET6_ADDRSTRLEN];
    if (s == NULL) {
        PyErr_Clear();
        return 0;
    }
    if (n <= 0 || n >= INET6_ADDRSTRLEN || (Py_ssize_t)strlen(s) != n)
        return 0;
    if (inet_pton(v6 ? AF_INET6 : AF_INET, s, out) != 1)
        return 0;
    if (v6) {
        static const unsigned char zero[10] = {0};
        if (memcmp(out, zero, 10) == 0)
            return 0; /* ::a.b.c.d forms: Python prints them as ipaddress does */
    }
    if (inet_ntop(v6 ? AF_INET6 : AF_INET, out, back, sizeof back) == NULL)
        return 0;
    return strcmp(back, s) == 0;
}

/* `value` lower-cased (a new reference) when it is an ASCII str, else NULL without an error set. */
static PyObject *ascii_lower(PyObject *value) {
    Py_ssize_t n, i;
    const Py_UCS1 *src;
    Py_UCS1 *dst;
    PyObject *out;
    int upper = 0;
    if (!PyUnicode_CheckExact(value) || !PyUnicode_IS_ASCII(value))
        return NULL;
    n = PyUnicode_GET_LENGTH(value);
    src = PyUnicode_1BYTE_DATA(value);
    for (i = 0; i < n; i++)
        if (src[i] >= 'A' && src[i] <= 'Z') {
            upper = 1;
            break;
        }
    if (!upper) {
        Py_INCREF(value);
        return value;
    }
    out = PyUnicode_New(n, 127);
    if (out == NULL)
        return NULL;
    dst = PyUnicode_1BYTE_DATA(out);
    for (i = 0; i < n; i++)
        dst[i] = (src[i] >= 'A' && src[i] <= 'Z') ? (Py_UCS1)(src[i] + 32) : src[i];
    return out;
}

/* A DNS-1123 label: 1-63 of a-z, 0-9 and '-', starting and ending with a letter or digit. */
static int is_label(PyObject *lowered) {
    Py_ssize_t n = PyUnicode_GET_LENGTH(lowered), i;
    const Py_UCS1 *s = PyUnicode_1BYTE_DATA(lowered);
    if (n < 1 || n > 63)
        return 0;
    for (i = 0; i < n; i++) {
        Py_UCS1 c = s[i];
        int alnum = (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9');
        if (!alnum && (c != '-' || i == 0 || i == n - 1))
            return 0;
    }
    return 1;
}

/* Borrowed `d[key]` or NULL when absent (never an error: the keys are str). */
static PyObject *get(PyObject *d, PyObject *key) { return PyDict_GetItemWithError(d, key); }

/* A name column's value for an optional str field: "" when absent or false, the str (interned when
 * `intern`), NULL (declined) for anything else; -1 on an error. */
static int text_field(PyObject *ep, PyObject *key, int intern, PyObject **out) {
    PyObject *v = get(ep, key);
    int truth;
    if (v == NULL) {
        if (PyErr_Occurred())
            return -1;
        Py_INCREF(s_empty);
        *out = s_empty;
        return 1;
    }
    if (PyUnicode_CheckExact(v)) {
        if (PyUnicode_GET_LENGTH(v) == 0) {
            Py_INCREF(s_empty);
            *out = s_empty;
            return 1;
        }
        Py_INCREF(v);
        if (intern)
            PyUnicode_InternInPlace(&v);
        *out = v;
        return 1;
    }
    truth = PyObject_IsTrue(v);
    if (truth < 0)
        return -1;
    if (truth)
        return 0; /* a number or an object: Python's loop makes its text */
    Py_INCREF(s_empty);
    *out = s_empty;
    return 1;
}

static PyObject *common_columns(PyObject *self, PyObject *args) {
    PyObject *eps, *addrs = NULL, *ready = NULL, *hosts = NULL, *pods = NULL, *nodes = NULL, *zones = NULL;
    int v6;
    Py_ssize_t n, i, width;
    char *buf;
    (void)self;
    if (!PyArg_ParseTuple(args, "O!p:common_columns", &PyList_Type, &eps, &v6))
        return NULL;
    n = PyList_GET_SIZE(eps);
    width = v6 ? 16 : 4;
    addrs = PyBytes_FromStringAndSize(NULL, n * width);
    ready = PyList_New(n);
    hosts = PyList_New(n);
    pods = PyList_New(n);
    nodes = PyList_New(n);
    zones = PyList_New(n);
    if (!addrs || !ready || !hosts || !pods || !nodes || !zones)
        goto error;
    buf = PyBytes_AS_STRING(addrs);
    for (i = 0; i < n; i++) {
        PyObject *ep = PyList_GET_ITEM(eps, i), *v, *item, *name;
        int truth, r;
        if (!PyDict_CheckExact(ep))
            goto declined;
        /* addresses: exactly one canonical address of the family */
        v = get(ep, k_addresses);
        if (v == NULL || !PyList_CheckExact(v) || PyList_GET_SIZE(v) != 1)
            goto declined_or_error;
        item = PyList_GET_ITEM(v, 0);
        if (!PyUnicode_CheckExact(item) || !pack_canonical(item, v6, (unsigned char *)buf + i * width))
            goto declined;
        /* conditions.ready */
        truth = 1;
        v = get(ep, k_conditions);
        if (v != NULL) {
            if (!PyDict_CheckExact(v))
                goto declined;
            v = get(v, k_ready);
            if (v != NULL && v != Py_None) {
                truth = PyObject_IsTrue(v);
                if (truth < 0)
                    goto error;
            }
        }
        if (PyErr_Occurred())
            goto error;
        item = truth ? Py_True : Py_False;
        Py_INCREF(item);
        PyList_SET_ITEM(ready, i, item);
        /* hostname */
        v = get(ep, k_hostname);
        if (v == NULL) {
            if (PyErr_Occurred())
                goto error;
            Py_INCREF(s_empty);
            item = s_empty;
        } else {
            truth = PyObject_IsTrue(v);
            if (truth < 0)
                goto error;
            if (!truth) {
                Py_INCREF(s_empty);
                item = s_empty;
            } else {
                item = ascii_lower(v);
                if (item == NULL) {
                    if (PyErr_Occurred())
                        goto error;
                    goto declined;
                }
                if (!is_label(item)) {
                    Py_DECREF(item);
                    goto declined;
                }
            }
        }
        PyList_SET_ITEM(hosts, i, item);
        /* targetRef: a Pod's name */
        item = NULL;
        v = get(ep, k_target_ref);
        if (v != NULL) {
            PyObject *kind;
            if (!PyDict_CheckExact(v))
                goto declined;
            kind = get(v, k_kind);
            if (kind == NULL && PyErr_Occurred())
                goto error;
            r = kind == NULL ? 1 : PyObject_RichCompareBool(kind, s_pod, Py_EQ);
            if (r < 0)
                goto error;
            if (r) {
                name = get(v, k_name);
                if (name == NULL && PyErr_Occurred())
                    goto error;
                if (name != NULL && PyUnicode_CheckExact(name)) {
                    item = ascii_lower(name);
                    if (item == NULL) {
                        if (PyErr_Occurred())
                            goto error;
                        goto declined;
                    }
                }
            }
        } else if (PyErr_Occurred()) {
            goto error;
        }
        if (item == NULL) {
            Py_INCREF(s_empty);
            item = s_empty;
        }
        PyList_SET_ITEM(pods, i, item);
        /* nodeName, zone */
        r = text_field(ep, k_node_name, 1, &item);
        if (r < 0)
            goto error;
        if (r == 0)
            goto declined;
        PyList_SET_ITEM(nodes, i, item);
        r = text_field(ep, k_zone, 1, &item);
        if (r < 0)
            goto error;
        if (r == 0)
            goto declined;
        PyList_SET_ITEM(zones, i, item);
        /* hints: the Python loop's */
        v = get(ep, k_hints);
        if (v != NULL) {
            truth = PyObject_IsTrue(v);
            if (truth < 0)
                goto error;
            if (truth)
                goto declined;
        } else if (PyErr_Occurred()) {
            goto error;
        }
        continue;
    declined_or_error:
        if (PyErr_Occurred())
            goto error;
        goto declined;
    }
    return Py_BuildValue("(NNNNNN)", addrs, ready, hosts, pods, nodes, zones);
declined:
    Py_DECREF(addrs);
    Py_DECREF(ready);
    Py_DECREF(hosts);
    Py_DECREF(pods);
    Py_DECREF(nodes);
    Py_DECREF(zones);
    Py_RETURN_NONE;
error:
    Py_XDECREF(addrs);
    Py_XDECREF(ready);
    Py_XDECREF(hosts);
    Py_XDECREF(pods);
    Py_XDECREF(nodes);
    Py_XDECREF(zones);
    return NULL;
}

static PyMethodDef methods[] = {
    {"common_columns", common_columns, METH_VARARGS,
     "common_columns(endpoints, v6) -> (addrs, ready, hostnames, pod_names, nodes, zones) or None"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_slim", NULL, -1, methods, NULL, NULL, NULL, NULL};

PyMODINIT_FUNC PyInit__slim(void) {
#define KEY(var, text)                                                                                          \
    if ((var = PyUnicode_InternFromString(text)) == NULL)                                                     \
        return NULL;
    KEY(k_addresses, "addresses")
    KEY(k_conditions, "conditions")
    KEY(k_ready, "ready")
    KEY(k_hostname, "hostname")
    KEY(k_target_ref, "targetRef")
    KEY(k_kind, "kind")
    KEY(k_name, "name")
    KEY(k_node_name, "nodeName")
    KEY(k_zone, "zone")
    KEY(k_hints, "hints")
    KEY(s_pod, "Pod")
    KEY(s_empty, "")
#undef KEY
    return PyModule_Create(&module);
}
