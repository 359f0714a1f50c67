// jitguard._src._torchext.ext: TENSORS_MATCH's checker, reading each tensor's metadata
// straight from its TensorImpl. [Note: A native tensor checker] in
// jitguard/_src/torch/native_checks.py says what it compares, where it hands a call to
// torch's own checker, and why its verdicts are that checker's.
//
// Built against one torch (JITGUARD_TORCH_VERSION, compared on import by the adapter): the
// TensorImpl layout and inline accessors used here are that build's.

#include <Python.h>

#include <c10/core/impl/LocalDispatchKeySet.h>
#include <torch/csrc/autograd/python_variable.h>

#include <cstdint>
#include <cstring>
#include <vector>

#ifndef JITGUARD_TORCH_VERSION
#error "JITGUARD_TORCH_VERSION must name the torch this is built against"
#endif

// Bumped whenever the Python-facing interface changes (native_checks.ABI).
#define TORCHEXT_ABI 1

namespace {

// A dimension whose size or stride is not compared (a dynamic one).
constexpr int64_t ANY_DIM = INT64_MIN;

// The keys torch's checker leaves out of the comparison in most modes; a tensor that has
// any of them after the thread-local sets are applied goes to torch's checker.
const c10::DispatchKeySet PYTHON_KEYS({c10::DispatchKey::Python,
                                       c10::DispatchKey::PythonTLSSnapshot,
                                       c10::DispatchKey::PythonDispatcher});

// One tensor's expectation. Its sizes and strides follow it in ``Checker::dims``.
struct Expected {
  PyTypeObject* pytype;  // a strong reference
  uint64_t keys;         // the dispatch keys with the thread-local sets applied
  caffe2::TypeMeta dtype;
  c10::DeviceIndex device_index;
  bool requires_grad;
  int64_t ndim;
  size_t dims_at;  // sizes at dims[dims_at ..], strides right after them
};

struct Checker {
  PyObject_HEAD
  vectorcallfunc vectorcall;
  std::vector<Expected>* expected;
  std::vector<int64_t>* dims;
  // The distinctness table: open addressing over the arguments' addresses, an entry
  // counting as present only when its stamp is this call's (so it is never cleared).
  std::vector<uintptr_t>* seen_at;
  std::vector<uint64_t>* seen_stamp;
  uint64_t stamp;
  PyObject* fallback;  // torch's checker for the same tensors: check(*tensors)
  Py_ssize_t native_calls;
  Py_ssize_t fallback_calls;
};

// Whether the tensor's sizes and strides are plain integers that this file may read.
inline bool plain_layout(c10::TensorImpl* impl) {
  return !impl->has_symbolic_sizes_strides() && impl->layout() == c10::kStrided &&
         !impl->is_nested();
}

enum Verdict { FAILS, HOLDS, ASK_TORCH };

Verdict check_one(const Expected& e, const int64_t* dims, c10::TensorImpl* impl,
                  const c10::impl::LocalDispatchKeySet& tls) {
  c10::DispatchKeySet keys = (impl->key_set() | tls.included_) - tls.excluded_;
  if (keys.has_any(PYTHON_KEYS)) return ASK_TORCH;
  // The expected keys are a plain strided tensor's: a sparse, nested or quantized tensor,
  // or one on another backend, fails here, before anything layout-specific is read.
  if (keys.raw_repr() != e.keys || impl->dtype() != e.dtype ||
      impl->device().index() != e.device_index || impl->requires_grad() != e.requires_grad)
    return FAILS;
  if (!plain_layout(impl)) return ASK_TORCH;
  if (impl->dim() != e.ndim) return FAILS;
  c10::IntArrayRef sizes = impl->sizes();
  c10::IntArrayRef strides = impl->strides();
  const int64_t* want_sizes = dims + e.dims_at;
  const int64_t* want_strides = want_sizes + e.ndim;
  for (int64_t d = 0; d < e.ndim; d++) {
    if (want_sizes[d] != ANY_DIM && want_sizes[d] != sizes[d]) return FAILS;
    if (want_strides[d] != ANY_DIM && want_strides[d] != strides[d]) return FAILS;
  }
  return HOLDS;
}

// Whether some object is passed twice (torch's checker fails such a call).
bool has_repeats(Checker* self, PyObject* const* args, Py_ssize_t n) {
  if (n < 2) return false;
  if (n <= 8) {
    for (Py_ssize_t i = 1; i < n; i++)
      for (Py_ssize_t j = 0; j < i; j++)
        if (args[i] == args[j]) return true;
    return false;
  }
  std::vector<uintptr_t>& at = *self->seen_at;
  std::vector<uint64_t>& stamps = *self->seen_stamp;
  size_t mask = at.size() - 1;
  uint64_t stamp = ++self->stamp;
  for (Py_ssize_t i = 0; i < n; i++) {
    uintptr_t p = reinterpret_cast<uintptr_t>(args[i]);
    size_t slot = static_cast<size_t>((p >> 4) * 0x9E3779B97F4A7C15ull) & mask;
    while (stamps[slot] == stamp) {
      if (at[slot] == p) return true;
      slot = (slot + 1) & mask;
    }
    stamps[slot] = stamp;
    at[slot] = p;
  }
  return false;
}

PyObject* checker_call(PyObject* self_, PyObject* const* args, size_t nargsf,
                       PyObject* kwnames) {
  Checker* self = reinterpret_cast<Checker*>(self_);
  Py_ssize_t n = PyVectorcall_NARGS(nargsf);
  const std::vector<Expected>& expected = *self->expected;
  if (kwnames != nullptr || static_cast<size_t>(n) != expected.size()) {
    PyErr_Format(PyExc_TypeError, "the tensor checker takes %zd tensors, got %zd",
                 static_cast<Py_ssize_t>(expected.size()), n);
    return nullptr;
  }
  try {
    c10::impl::LocalDispatchKeySet tls = c10::impl::tls_local_dispatch_key_set();
    const int64_t* dims = self->dims->data();
    for (Py_ssize_t i = 0; i < n; i++) {
      const Expected& e = expected[i];
      PyObject* obj = args[i];
      if (Py_TYPE(obj) != e.pytype) goto fails;
      switch (check_one(e, dims, THPVariable_Unpack(obj).unsafeGetTensorImpl(), tls)) {
        case FAILS:
          goto fails;
        case ASK_TORCH:
          goto ask_torch;
        case HOLDS:
          break;
      }
    }
  } catch (...) {  // an accessor that throws (a custom device or sizes policy)
    goto ask_torch;
  }
  if (has_repeats(self, args, n)) goto fails;
  self->native_calls++;
  Py_RETURN_TRUE;
fails:
  self->native_calls++;
  Py_RETURN_FALSE;
ask_torch:
  self->fallback_calls++;
  return PyObject_Vectorcall(self->fallback, args, nargsf, nullptr);
}

void checker_dealloc(PyObject* self_) {
  Checker* self = reinterpret_cast<Checker*>(self_);
  if (self->expected != nullptr) {
    for (const Expected& e : *self->expected) Py_DECREF(e.pytype);
  }
  delete self->expected;
  delete self->dims;
  delete self->seen_at;
  delete self->seen_stamp;
  Py_XDECREF(self->fallback);
  Py_TYPE(self_)->tp_free(self_);
}

// A dims list entry: an int, or None (not compared).
bool read_dims(PyObject* list, int64_t ndim, const char* what, Py_ssize_t i,
               std::vector<int64_t>& out) {
  if (!PyList_Check(list) || PyList_GET_SIZE(list) != ndim) {
    PyErr_Format(PyExc_ValueError, "tensor %zd: %s must be a list of %lld ints or Nones", i,
                 what, static_cast<long long>(ndim));
    return false;
  }
  for (int64_t d = 0; d < ndim; d++) {
    PyObject* v = PyList_GET_ITEM(list, d);
    if (v == Py_None) {
      out.push_back(ANY_DIM);
      continue;
    }
    if (!PyLong_CheckExact(v)) {
      PyErr_Format(PyExc_ValueError, "tensor %zd: %s[%lld] is a %s, not an int or None", i,
                   what, static_cast<long long>(d), Py_TYPE(v)->tp_name);
      return false;
    }
    long long x = PyLong_AsLongLong(v);
    if (x == -1 && PyErr_Occurred()) return false;
    if (x == ANY_DIM) {
      PyErr_Format(PyExc_ValueError, "tensor %zd: %s[%lld] is out of range", i, what,
                   static_cast<long long>(d));
      return false;
    }
    out.push_back(x);
  }
  return true;
}

// Checker(tensors, sizes, strides, fallback): tensors a tuple of tensors whose layout this
// file reads, sizes/strides one list per tensor (ints, None where not compared), fallback
// torch's checker built for the same tensors and dims.
PyObject* checker_new(PyTypeObject* type, PyObject* args, PyObject* kwargs) {
  static const char* names[] = {"tensors", "sizes", "strides", "fallback", nullptr};
  PyObject *tensors, *sizes, *strides, *fallback;
  if (!PyArg_ParseTupleAndKeywords(args, kwargs, "O!O!O!O:Checker",
                                   const_cast<char**>(names), &PyTuple_Type, &tensors,
                                   &PyList_Type, &sizes, &PyList_Type, &strides, &fallback))
    return nullptr;
  Py_ssize_t n = PyTuple_GET_SIZE(tensors);
  if (PyList_GET_SIZE(sizes) != n || PyList_GET_SIZE(strides) != n) {
    PyErr_SetString(PyExc_ValueError, "sizes and strides need one list per tensor");
    return nullptr;
  }
  if (!PyCallable_Check(fallback)) {
    PyErr_SetString(PyExc_TypeError, "fallback must be callable (torch's checker)");
    return nullptr;
  }
  Checker* self = reinterpret_cast<Checker*>(type->tp_alloc(type, 0));
  if (self == nullptr) return nullptr;
  self->vectorcall = checker_call;
  self->expected = new std::vector<Expected>();
  self->dims = new std::vector<int64_t>();
  size_t table = 16;
  while (table < 2 * static_cast<size_t>(n)) table *= 2;
  self->seen_at = new std::vector<uintptr_t>(table, 0);
  self->seen_stamp = new std::vector<uint64_t>(table, 0);
  self->stamp = 0;
  Py_INCREF(fallback);
  self->fallback = fallback;
  try {
    c10::impl::LocalDispatchKeySet tls = c10::impl::tls_local_dispatch_key_set();
    self->expected->reserve(n);
    for (Py_ssize_t i = 0; i < n; i++) {
      PyObject* obj = PyTuple_GET_ITEM(tensors, i);
      if (!THPVariable_Check(obj)) {
        PyErr_Format(PyExc_TypeError, "tensor %zd is a %s, not a tensor", i,
                     Py_TYPE(obj)->tp_name);
        goto fail;
      }
      c10::TensorImpl* impl = THPVariable_Unpack(obj).unsafeGetTensorImpl();
      c10::DispatchKeySet keys = (impl->key_set() | tls.included_) - tls.excluded_;
      if (!plain_layout(impl) || keys.has_any(PYTHON_KEYS)) {
        PyErr_Format(PyExc_ValueError,
                     "tensor %zd is not a plain strided tensor (symbolic sizes, another "
                     "layout, nested, or a Python dispatch key): torch's checker handles it",
                     i);
        goto fail;
      }
      Expected e;
      e.pytype = Py_TYPE(obj);
      e.keys = keys.raw_repr();
      e.dtype = impl->dtype();
      e.device_index = impl->device().index();
      e.requires_grad = impl->requires_grad();
      e.ndim = impl->dim();
      e.dims_at = self->dims->size();
      if (!read_dims(PyList_GET_ITEM(sizes, i), e.ndim, "sizes", i, *self->dims) ||
          !read_dims(PyList_GET_ITEM(strides, i), e.ndim, "strides", i, *self->dims))
        goto fail;
      Py_INCREF(e.pytype);
      self->expected->push_back(e);
    }
  } catch (const std::exception& ex) {
    PyErr_Format(PyExc_RuntimeError, "reading a tensor's metadata failed: %s", ex.what());
    goto fail;
  }
  return reinterpret_cast<PyObject*>(self);
fail:
  Py_DECREF(self);
  return nullptr;
}

PyObject* checker_counts(PyObject* self_, PyObject*) {
  Checker* self = reinterpret_cast<Checker*>(self_);
  return Py_BuildValue("(nn)", self->native_calls, self->fallback_calls);
}

PyObject* checker_get_fallback(PyObject* self_, void*) {
  PyObject* f = reinterpret_cast<Checker*>(self_)->fallback;
  Py_INCREF(f);
  return f;
}

PyObject* checker_get_size(PyObject* self_, void*) {
  return PyLong_FromSsize_t(
      static_cast<Py_ssize_t>(reinterpret_cast<Checker*>(self_)->expected->size()));
}

PyMethodDef checker_methods[] = {
    {"counts", checker_counts, METH_NOARGS,
     "(calls decided here, calls handed to torch's checker)"},
    {nullptr, nullptr, 0, nullptr}};

PyGetSetDef checker_getset[] = {
    {"fallback", checker_get_fallback, nullptr, "torch's checker for the same tensors",
     nullptr},
    {"size", checker_get_size, nullptr, "how many tensors a call checks", nullptr},
    {nullptr, nullptr, nullptr, nullptr, nullptr}};

PyTypeObject CheckerType = {PyVarObject_HEAD_INIT(nullptr, 0)};

PyModuleDef module_def = {PyModuleDef_HEAD_INIT, "jitguard._src._torchext.ext",
                          "TENSORS_MATCH's native checker ([Note: A native tensor checker]).",
                          -1, nullptr};

}  // namespace

PyMODINIT_FUNC PyInit_ext(void) {
  CheckerType.tp_name = "jitguard._src._torchext.ext.Checker";
  CheckerType.tp_doc =
      "Checker(tensors, sizes, strides, fallback): called on as many tensors, True when "
      "each passes TENSOR_MATCH against its build-time tensor and no two are one object.";
  CheckerType.tp_basicsize = sizeof(Checker);
  CheckerType.tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_VECTORCALL;
  CheckerType.tp_new = checker_new;
  CheckerType.tp_dealloc = checker_dealloc;
  CheckerType.tp_vectorcall_offset = offsetof(Checker, vectorcall);
  CheckerType.tp_call = PyVectorcall_Call;
  CheckerType.tp_methods = checker_methods;
  CheckerType.tp_getset = checker_getset;
  if (PyType_Ready(&CheckerType) < 0) return nullptr;
  PyObject* m = PyModule_Create(&module_def);
  if (m == nullptr) return nullptr;
  Py_INCREF(&CheckerType);
  if (PyModule_AddObject(m, "Checker", reinterpret_cast<PyObject*>(&CheckerType)) < 0 ||
      PyModule_AddIntConstant(m, "ABI", TORCHEXT_ABI) < 0 ||
      PyModule_AddStringConstant(m, "TORCH_VERSION", JITGUARD_TORCH_VERSION) < 0) {
    Py_DECREF(m);
    return nullptr;
  }
  return m;
}
