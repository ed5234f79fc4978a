// Runs the glibc_compat self-test, which lives in a shared library linked
// like libtessera-cuda.so (glibc_compat_test.cc).
extern "C" int tessera_glibc_compat_selftest();

int main() { return tessera_glibc_compat_selftest(); }
