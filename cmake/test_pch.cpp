// The program that builds the tests' precompiled header (cmake/test_pch.cmake);
// it does nothing and is never run.
int main() { return 0; }
