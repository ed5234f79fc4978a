// Capacities of DRA requests and allocation results: absent keys, rounding,
// bad quantities and values that are not strings.
#include "core/dra_capacity.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

namespace tessera::core {
namespace {

using nlohmann::json;

TEST(PercentToCoreMilliTest, RoundsUp) {
  EXPECT_EQ(PercentToCoreMilli("30").value(), 300);
  EXPECT_EQ(PercentToCoreMilli("12.5").value(), 125);
  EXPECT_EQ(PercentToCoreMilli("0.01").value(), 1);
  EXPECT_EQ(PercentToCoreMilli("0").value(), 0);
  EXPECT_FALSE(PercentToCoreMilli("x").ok());
  EXPECT_FALSE(PercentToCoreMilli("-10").ok());
}

TEST(ReadDraCapacityTest, NamedAndAbsentCapacities) {
  EXPECT_EQ(ReadDraCapacity(json{{"memory", "8Gi"}, {"compute", "30"}}).value(), (DraCapacity{8192, 300}));
  EXPECT_EQ(ReadDraCapacity(json{{"memory", "8Gi"}}).value(), (DraCapacity{8192, std::nullopt}));
  EXPECT_EQ(ReadDraCapacity(json{{"compute", "12.5"}}).value(), (DraCapacity{std::nullopt, 125}));
  // Empty strings, other keys and a map that is not one name nothing.
  EXPECT_EQ(ReadDraCapacity(json{{"memory", ""}, {"compute", ""}, {"other", 7}}).value(), DraCapacity{});
  EXPECT_EQ(ReadDraCapacity(json::object()).value(), DraCapacity{});
  EXPECT_EQ(ReadDraCapacity(json("8Gi")).value(), DraCapacity{});
  EXPECT_EQ(ReadDraCapacity(json()).value(), DraCapacity{});
}

TEST(ReadDraCapacityTest, MemoryRoundsUpToAMiB) {
  EXPECT_EQ(ReadDraCapacity(json{{"memory", "1G"}})->mem_mib, 954);
  EXPECT_EQ(ReadDraCapacity(json{{"memory", "1"}})->mem_mib, 1);
  EXPECT_EQ(ReadDraCapacity(json{{"memory", "0"}})->mem_mib, 0);  // callers decide whether 0 is a share
}

void ExpectInvalid(const json& capacity, const std::string& start) {
  Result<DraCapacity> c = ReadDraCapacity(capacity);
  ASSERT_FALSE(c.ok()) << capacity.dump();
  EXPECT_EQ(c.status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(c.status().message().rfind(start, 0), 0u) << c.status().message();
}

TEST(ReadDraCapacityTest, BadValuesAreErrorsNamingTheCapacity) {
  ExpectInvalid(json{{"memory", "lots"}}, "memory: ");
  ExpectInvalid(json{{"memory", "-1Gi"}}, "memory: ");
  ExpectInvalid(json{{"compute", "x"}, {"memory", "1Gi"}}, "compute: ");
  ExpectInvalid(json{{"memory", 8192}}, "memory is not a quantity string");
  ExpectInvalid(json{{"compute", json::array()}}, "compute is not a quantity string");
  ExpectInvalid(json{{"compute", nullptr}}, "compute is not a quantity string");
}

TEST(ConsumedCapacityOfTest, WithoutConsumedCapacityTheWholeGpu) {
  const DraConsumedCapacity whole{std::nullopt, 1000};
  EXPECT_EQ(ConsumedCapacityOf(json{{"device", "gpu-0"}}).value(), whole);
  EXPECT_EQ(ConsumedCapacityOf(json{{"device", "gpu-0"}, {"consumedCapacity", "8Gi"}}).value(), whole);
  EXPECT_EQ(ConsumedCapacityOf(json::array()).value(), whole);
}

TEST(ConsumedCapacityOfTest, AbsentMemoryIsTheCardAbsentComputeIsNone) {
  EXPECT_EQ(ConsumedCapacityOf(json{{"consumedCapacity", {{"memory", "8Gi"}, {"compute", "30"}}}}).value(),
            (DraConsumedCapacity{8192, 300}));
  EXPECT_EQ(ConsumedCapacityOf(json{{"consumedCapacity", {{"compute", "25"}}}}).value(),
            (DraConsumedCapacity{std::nullopt, 250}));
  EXPECT_EQ(ConsumedCapacityOf(json{{"consumedCapacity", {{"memory", "1Gi"}}}}).value(),
            (DraConsumedCapacity{1024, 0}));
  EXPECT_EQ(ConsumedCapacityOf(json{{"consumedCapacity", json::object()}}).value(),
            (DraConsumedCapacity{std::nullopt, 0}));
}

TEST(ConsumedCapacityOfTest, ErrorsSayConsumed) {
  Result<DraConsumedCapacity> bad = ConsumedCapacityOf(json{{"consumedCapacity", {{"memory", "lots"}}}});
  EXPECT_EQ(bad.status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(bad.status().message().rfind("consumed memory: ", 0), 0u) << bad.status().message();
  Result<DraConsumedCapacity> number = ConsumedCapacityOf(json{{"consumedCapacity", {{"compute", 30}}}});
  EXPECT_EQ(number.status().message(), "consumed compute is not a quantity string");
}

}  // namespace
}  // namespace tessera::core
