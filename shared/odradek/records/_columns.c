/*
 * odradek.records._columns: v2 records (Kafka's DefaultRecord, KIP-98) to and from
 * column positions in C, for the Spark pipeline's column-wise paths.
 *
 * Why: a record's start depends on the previous record's length, so finding the
 * records of a batch is a sequential walk; in Python that walk cost about 3 us per
 * record and dominated the Spark source (issue 20). Likewise laying out record
 * bodies (varint prefixes around key and value bytes) in numpy took several passes
 * over every byte for the sink.
 *
 * fields(buf, spans) -> bytes | None
 *   spans: int64 triples (start, end, count): the record bytes of one uncompressed
 *   batch (after its 61-byte header) and its record count. Walks every record and
 *   returns 8 int64 columns of `total` values each, column after column:
 *   timestampDelta, offsetDelta, keyStart, keyLength, valueStart, valueLength,
 *   headerCount, headersStart (starts are positions in buf; lengths -1 for null).
 *   Returns None when anything does not fit (a length past its record, records not
 *   filling the span exactly, a varint too long): the caller then takes the numpy
 *   path (odradek.pipeline.record_columns), which has the messages; this walk is
 *   never more lenient than that one.
 *
 * records(keys, values, n, head) -> bytearray
 *   keys/values: None (all null) or (validity bitmap | None, int32 offsets, data |
 *   None, array offset), the buffers of an Arrow binary array. Returns `head` zero
 *   bytes (room for the caller's batch header) then the bodies of n records, each
 *   length-prefixed: attributes 0, timestampDelta 0, offsetDelta i,
 *   key, value, headerCount 0 (what MemoryRecordsBuilder writes for such records).
 *
 * Varints are zig-zag, at most 5 bytes (varint) or 10 (varlong), as
 * odradek.records.varint decodes them.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

static int
read_zigzag(const unsigned char *b, Py_ssize_t end, Py_ssize_t *p, int max_bytes,
            int64_t *out)
{
    uint64_t raw = 0;
    Py_ssize_t pos = *p;
    for (int i = 0; i < max_bytes; i++) {
        if (pos + i >= end)
            return 0;
        unsigned char c = b[pos + i];
        raw |= (uint64_t)(c & 0x7F) << (7 * i);
        if (c < 0x80) {
            if (max_bytes == 5 && raw > 0xFFFFFFFFu)
                return 0;
            *p = pos + i + 1;
            *out = (int64_t)(raw >> 1) ^ -(int64_t)(raw & 1);
            return 1;
        }
    }
    return 0;
}

/* One batch's records into the 8 columns at row `row`; 0 when malformed. */
static int
walk(const unsigned char *b, Py_ssize_t start, Py_ssize_t end, int64_t count,
     int64_t *cols[8], Py_ssize_t row)
{
    Py_ssize_t p = start;
    for (int64_t i = 0; i < count; i++, row++) {
        int64_t length, ts_delta, off_delta, klen, vlen, hcount;
        if (!read_zigzag(b, end, &p, 5, &length) || length < 6 || length > end - p)
            return 0;
        Py_ssize_t body_end = p + (Py_ssize_t)length;
        Py_ssize_t q = p + 1; /* attributes */
        if (!read_zigzag(b, body_end, &q, 10, &ts_delta))
            return 0;
        if (!read_zigzag(b, body_end, &q, 5, &off_delta))
            return 0;
        if (!read_zigzag(b, body_end, &q, 5, &klen) || klen < -1 || klen > body_end - q)
            return 0;
        Py_ssize_t kstart = q;
        if (klen > 0)
            q += (Py_ssize_t)klen;
        if (!read_zigzag(b, body_end, &q, 5, &vlen) || vlen < -1 || vlen > body_end - q)
            return 0;
        Py_ssize_t vstart = q;
        if (vlen > 0)
            q += (Py_ssize_t)vlen;
        if (!read_zigzag(b, body_end, &q, 5, &hcount) || hcount < 0)
            return 0;
        cols[0][row] = ts_delta;
        cols[1][row] = off_delta;
        cols[2][row] = kstart;
        cols[3][row] = klen;
        cols[4][row] = vstart;
        cols[5][row] = vlen;
        cols[6][row] = hcount;
        cols[7][row] = q;
        p = body_end;
    }
    return p == end;
}

static PyObject *
fields(PyObject *self, PyObject *args)
{
    Py_buffer buf, spans;
    if (!PyArg_ParseTuple(args, "y*y*", &buf, &spans))
        return NULL;
    PyObject *result = NULL;
    const int64_t *s = (const int64_t *)spans.buf;
    Py_ssize_t nspans = spans.len / (3 * (Py_ssize_t)sizeof(int64_t));
    int64_t total = 0;
    int ok = 1;
    for (Py_ssize_t k = 0; k < nspans && ok; k++) {
        int64_t a = s[3 * k], e = s[3 * k + 1], c = s[3 * k + 2];
        if (a < 0 || e < a || e > buf.len || c < 0 || c > (e - a) / 7)
            ok = 0;
        else
            total += c;
    }
    if (!ok) {
        result = Py_None;
        Py_INCREF(result);
        goto done;
    }
    result = PyBytes_FromStringAndSize(NULL, (Py_ssize_t)(8 * total * sizeof(int64_t)));
    if (result == NULL)
        goto done;
    int64_t *out = (int64_t *)PyBytes_AS_STRING(result);
    int64_t *cols[8];
    for (int f = 0; f < 8; f++)
        cols[f] = out + f * total;
    Py_BEGIN_ALLOW_THREADS
    Py_ssize_t row = 0;
    for (Py_ssize_t k = 0; k < nspans && ok; k++) {
        ok = walk((const unsigned char *)buf.buf, (Py_ssize_t)s[3 * k],
                  (Py_ssize_t)s[3 * k + 1], s[3 * k + 2], cols, row);
        row += (Py_ssize_t)s[3 * k + 2];
    }
    Py_END_ALLOW_THREADS
    if (!ok) {
        Py_DECREF(result);
        result = Py_None;
        Py_INCREF(result);
    }
done:
    PyBuffer_Release(&buf);
    PyBuffer_Release(&spans);
    return result;
}

/* An Arrow binary array's buffers, as records() takes them. */
typedef struct {
    int present;
    Py_buffer validity, offsets, data;
    int has_validity, has_data;
    Py_ssize_t offset;
} Column;

static void
release(Column *c)
{
    if (c->has_validity)
        PyBuffer_Release(&c->validity);
    if (c->present)
        PyBuffer_Release(&c->offsets);
    if (c->has_data)
        PyBuffer_Release(&c->data);
}

static int column_buffers(PyObject *obj, Py_ssize_t n, Column *c, const char *what);

/* 1 with the buffers held (release() them), or 0 with an exception and none held. */
static int
column(PyObject *obj, Py_ssize_t n, Column *c, const char *what)
{
    if (column_buffers(obj, n, c, what))
        return 1;
    release(c);
    return 0;
}

static int
column_buffers(PyObject *obj, Py_ssize_t n, Column *c, const char *what)
{
    memset(c, 0, sizeof(*c));
    if (obj == Py_None)
        return 1;
    PyObject *validity, *offsets, *data;
    if (!PyArg_ParseTuple(obj, "OOOn", &validity, &offsets, &data, &c->offset))
        return 0;
    if (PyObject_GetBuffer(offsets, &c->offsets, PyBUF_SIMPLE) < 0)
        return 0;
    c->present = 1;
    if (validity != Py_None) {
        if (PyObject_GetBuffer(validity, &c->validity, PyBUF_SIMPLE) < 0)
            return 0;
        c->has_validity = 1;
    }
    if (data != Py_None) {
        if (PyObject_GetBuffer(data, &c->data, PyBUF_SIMPLE) < 0)
            return 0;
        c->has_data = 1;
    }
    if (c->offset < 0 || (c->offset + n + 1) * (Py_ssize_t)sizeof(int32_t) > c->offsets.len ||
        (c->has_validity && (c->offset + n + 7) / 8 > c->validity.len)) {
        PyErr_Format(PyExc_ValueError, "%s buffers shorter than %zd values", what, n);
        return 0;
    }
    const int32_t *o = (const int32_t *)c->offsets.buf + c->offset;
    Py_ssize_t data_len = c->has_data ? c->data.len : 0;
    for (Py_ssize_t i = 0; i < n; i++) {
        if (o[i] < 0 || o[i + 1] < o[i] || o[i + 1] > data_len) {
            PyErr_Format(PyExc_ValueError, "%s offsets outside the data", what);
            return 0;
        }
    }
    return 1;
}

/* -1 for null, else the value's length. */
static inline int64_t
value_length(const Column *c, Py_ssize_t i)
{
    if (!c->present)
        return -1;
    Py_ssize_t j = c->offset + i;
    if (c->has_validity && !((((const unsigned char *)c->validity.buf)[j >> 3] >> (j & 7)) & 1))
        return -1;
    const int32_t *o = (const int32_t *)c->offsets.buf + c->offset;
    return (int64_t)(o[i + 1] - o[i]);
}

static inline int
zigzag_size(int64_t v)
{
    uint64_t z = ((uint64_t)v << 1) ^ (uint64_t)(v >> 63);
    int n = 1;
    while (z >= 0x80) {
        z >>= 7;
        n++;
    }
    return n;
}

static inline unsigned char *
put_zigzag(unsigned char *w, int64_t v)
{
    uint64_t z = ((uint64_t)v << 1) ^ (uint64_t)(v >> 63);
    while (z >= 0x80) {
        *w++ = (unsigned char)(z | 0x80);
        z >>= 7;
    }
    *w++ = (unsigned char)z;
    return w;
}

static int64_t
body_size(int64_t i, int64_t klen, int64_t vlen)
{
    return 2 + zigzag_size(i) + zigzag_size(klen) + (klen > 0 ? klen : 0) + zigzag_size(vlen) +
           (vlen > 0 ? vlen : 0) + 1;
}

static PyObject *
records(PyObject *self, PyObject *args)
{
    PyObject *kobj, *vobj;
    Py_ssize_t n, head;
    if (!PyArg_ParseTuple(args, "OOnn", &kobj, &vobj, &n, &head))
        return NULL;
    if (n < 0 || head < 0) {
        PyErr_SetString(PyExc_ValueError, "negative record count");
        return NULL;
    }
    Column keys, values;
    PyObject *result = NULL;
    int kok = column(kobj, n, &keys, "key");
    int vok = kok && column(vobj, n, &values, "value");
    if (!kok || !vok)
        goto done;
    int64_t total = 0;
    for (Py_ssize_t i = 0; i < n; i++) {
        int64_t body = body_size(i, value_length(&keys, i), value_length(&values, i));
        total += zigzag_size(body) + body;
    }
    result = PyByteArray_FromStringAndSize(NULL, head + (Py_ssize_t)total);
    if (result == NULL)
        goto done;
    unsigned char *w = (unsigned char *)PyByteArray_AS_STRING(result);
    memset(w, 0, (size_t)head);
    w += head;
    Py_BEGIN_ALLOW_THREADS
    const int32_t *ko = keys.present ? (const int32_t *)keys.offsets.buf + keys.offset : NULL;
    const int32_t *vo = values.present ? (const int32_t *)values.offsets.buf + values.offset : NULL;
    const unsigned char *kd = keys.has_data ? (const unsigned char *)keys.data.buf : NULL;
    const unsigned char *vd = values.has_data ? (const unsigned char *)values.data.buf : NULL;
    for (Py_ssize_t i = 0; i < n; i++) {
        int64_t klen = value_length(&keys, i), vlen = value_length(&values, i);
        w = put_zigzag(w, body_size(i, klen, vlen));
        *w++ = 0; /* attributes */
        *w++ = 0; /* timestampDelta */
        w = put_zigzag(w, i);
        w = put_zigzag(w, klen);
        if (klen > 0) {
            memcpy(w, kd + ko[i], (size_t)klen);
            w += klen;
        }
        w = put_zigzag(w, vlen);
        if (vlen > 0) {
            memcpy(w, vd + vo[i], (size_t)vlen);
            w += vlen;
        }
        *w++ = 0; /* headerCount */
    }
    Py_END_ALLOW_THREADS
done:
    if (kok)
        release(&keys);
    if (vok)
        release(&values);
    return result;
}

static PyMethodDef methods[] = {
    {"fields", fields, METH_VARARGS,
     "fields(buf, spans) -> 8 int64 columns as bytes | None (see the module comment)"},
    {"records", records, METH_VARARGS,
     "records(keys, values, n, head) -> bytearray: head bytes, then n records (see the module comment)"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "odradek.records._columns",
    "v2 records to and from column positions in C (see odradek.pipeline.record_columns).",
    -1, methods,
};

PyMODINIT_FUNC
PyInit__columns(void)
{
    return PyModule_Create(&module);
}
