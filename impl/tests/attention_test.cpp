#include <catch2/catch.hpp>

#include "attncheck/attention.h"

TEST_CASE("placeholder") { CHECK(!attncheck::available_targets().empty()); }
