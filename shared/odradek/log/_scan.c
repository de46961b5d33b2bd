/*
 * odradek.log._scan: the record walk of odradek.log.validator._scan_records in C.
 *
 * Why: the storage node reads every record of every produced v2 batch (Kafka's
 * LogValidator record loops, issue 14), and in Python that loop cost more CPU than
 * everything else on the produce path together (about 5 us per 100-byte record).
 *
 * Contract: scan(buf, start, end, count, base_timestamp, compacted, check_ts, low,
 * high) walks `count` records filling buf[start:end] exactly, with the same reads,
 * in the same order and with the same limits as the Python walk, and returns
 * (max timestamp, its record index) only when the Python walk would find nothing
 * wrong: no structure error, no null key on a compacted topic, no timestamp outside
 * [low, high]. In every other case it returns None and the caller runs the Python
 * walk, which raises or collects the problems with Kafka's messages; so the
 * messages live in one place and this file only has to be as strict, never more
 * lenient (tests/unit/log/test_validator_scan.py compares both on fuzzed input).
 *
 * Varints as odradek.records.varint decodes them: zigzag, at most 5 bytes and 32
 * bits (varint) or 10 bytes and 64 bits (varlong); a truncated one is an error.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>

/* Unsigned base-128 varint of at most max_bytes bytes; 0 on error. */
static int
read_raw(const unsigned char *b, Py_ssize_t end, Py_ssize_t *p, int max_bytes,
         uint64_t *out)
{
    uint64_t raw = 0;
    int shift = 0;
    Py_ssize_t pos = *p;
    for (int i = 0; i < max_bytes; i++) {
        if (pos + i >= end || pos + i < 0)
            return 0;
        unsigned char c = b[pos + i];
        if (shift == 63 && (c & 0x7F) > 1)
            return 0; /* bits beyond 64 */
        raw |= (uint64_t)(c & 0x7F) << shift;
        if (c < 0x80) {
            *p = pos + i + 1;
            *out = raw;
            return 1;
        }
        shift += 7;
    }
    return 0;
}

static int
read_varint(const unsigned char *b, Py_ssize_t end, Py_ssize_t *p, int64_t *out)
{
    uint64_t raw;
    if (!read_raw(b, end, p, 5, &raw) || raw > 0xFFFFFFFFu)
        return 0;
    *out = (int64_t)(raw >> 1) ^ -(int64_t)(raw & 1);
    return 1;
}

static int
read_varlong(const unsigned char *b, Py_ssize_t end, Py_ssize_t *p, int64_t *out)
{
    uint64_t raw;
    if (!read_raw(b, end, p, 10, &raw))
        return 0;
    *out = (int64_t)(raw >> 1) ^ -(int64_t)(raw & 1);
    return 1;
}

/* 1: clean, the maximum in *max_ts/*max_index; 0: let the Python walk decide. */
static int
walk(const unsigned char *b, Py_ssize_t end, long long count, long long base_ts,
     int compacted, int check_ts, long long low, long long high,
     long long *max_ts, long long *max_index)
{
    const int min_record = 7;
    if (count < 0 || count > end / min_record)
        return 0;
    Py_ssize_t p = 0;
    long long best = -1, best_i = -1;
    for (long long i = 0; i < count; i++) {
        int64_t length, ts_delta, offset_delta, key_len, value_len, headers;
        if (!read_varint(b, end, &p, &length))
            return 0;
        if (length < min_record - 1 || length > end - p)
            return 0;
        Py_ssize_t body_end = p + (Py_ssize_t)length;
        Py_ssize_t q = p + 1; /* attributes */
        if (!read_varlong(b, end, &q, &ts_delta))
            return 0;
        if (!read_varint(b, end, &q, &offset_delta) || offset_delta != i)
            return 0;
        if (!read_varint(b, end, &q, &key_len) || key_len < -1)
            return 0;
        if (key_len == -1 && compacted)
            return 0;
        if (key_len > 0) {
            if (key_len > end - q)
                return 0; /* the next read would run past the buffer */
            q += (Py_ssize_t)key_len;
        }
        if (!read_varint(b, end, &q, &value_len) || value_len < -1)
            return 0;
        if (value_len > 0) {
            if (value_len > end - q)
                return 0;
            q += (Py_ssize_t)value_len;
        }
        if (q >= body_end)
            return 0;
        if (!read_varint(b, end, &q, &headers))
            return 0;
        if (headers < 0 || 2 * headers > body_end - q)
            return 0;
        for (int64_t h = 0; h < headers; h++) {
            int64_t hk, hv;
            if (!read_varint(b, end, &q, &hk) || hk < 0 || hk > end - q)
                return 0;
            q += (Py_ssize_t)hk;
            if (!read_varint(b, end, &q, &hv) || hv < -1)
                return 0;
            if (hv > 0) {
                if (hv > body_end - q)
                    return 0;
                q += (Py_ssize_t)hv;
            }
            if (q > body_end)
                return 0;
        }
        if (q != body_end)
            return 0;
        p = body_end;
        long long ts;
        if (__builtin_add_overflow(base_ts, (long long)ts_delta, &ts))
            return 0;
        if (ts > best) {
            best = ts;
            best_i = i;
        }
        if (check_ts && ts != -1 && (ts < low || ts > high))
            return 0;
    }
    if (p != end)
        return 0;
    *max_ts = best;
    *max_index = best_i;
    return 1;
}

static PyObject *
scan(PyObject *self, PyObject *args)
{
    Py_buffer view;
    Py_ssize_t start, stop;
    long long count, base_ts, low, high;
    int compacted, check_ts;
    if (!PyArg_ParseTuple(args, "y*nnLLppLL", &view, &start, &stop, &count, &base_ts,
                          &compacted, &check_ts, &low, &high))
        return NULL;
    if (start < 0 || stop < start || stop > view.len) {
        PyBuffer_Release(&view);
        PyErr_SetString(PyExc_ValueError, "scan range outside the buffer");
        return NULL;
    }
    long long max_ts = -1, max_index = -1;
    int ok;
    Py_BEGIN_ALLOW_THREADS
    ok = walk((const unsigned char *)view.buf + start, stop - start, count, base_ts,
              compacted, check_ts, low, high, &max_ts, &max_index);
    Py_END_ALLOW_THREADS
    PyBuffer_Release(&view);
    if (!ok)
        Py_RETURN_NONE;
    return Py_BuildValue("(LL)", max_ts, max_index);
}

static PyMethodDef methods[] = {
    {"scan", scan, METH_VARARGS,
     "scan(buf, start, end, count, base_timestamp, compacted, check_ts, low, high)"
     " -> (max_timestamp, index) | None"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "odradek.log._scan",
    "The validator's record walk in C (see odradek.log.validator).", -1, methods,
};

PyMODINIT_FUNC
PyInit__scan(void)
{
    return PyModule_Create(&module);
}
