// The OpenMetrics renderer: families grouped, counters with _total, label
// values escaped, histogram buckets cumulative with canonical `le`, and the
// closing # EOF. (The integration test parses real daemons' output with
// prometheus_client.)
#include "common/openmetrics.h"

#include <gtest/gtest.h>

#include "common/latency_histogram.h"

namespace rdmamsg::metrics {
namespace {

using nlohmann::json;

TEST(OpenMetrics, PeersAreGroupedByFamilyAndLabelValuesEscaped) {
  json s = {{"node", "al\"pha"},
            {"version", "1.2.3"},
            {"peers",
             {{{"name", "beta"}, {"state", "established"}, {"messages_sent", 7}},
              {{"name", "gam\\ma"}, {"state", "connecting"}, {"messages_sent", 1}}}}};
  const std::string text = render(s);
  EXPECT_NE(text.find(R"(rdmamsg_build_info{node="al\"pha",version="1.2.3",incarnation=""} 1)"),
            std::string::npos)
      << text;
  const auto up = text.find("# TYPE rdmamsg_peer_up gauge");
  const auto sent = text.find("# TYPE rdmamsg_peer_messages_sent counter");
  ASSERT_NE(up, std::string::npos);
  ASSERT_NE(sent, std::string::npos);
  // Both peers' samples of a family come before the next family.
  EXPECT_LT(text.find(R"(rdmamsg_peer_up{peer="gam\\ma"} 0)"), sent) << text;
  EXPECT_NE(text.find(R"(rdmamsg_peer_messages_sent_total{peer="beta"} 7)"), std::string::npos);
  EXPECT_EQ(text.substr(text.size() - 6), "# EOF\n");
  // A family without samples is left out altogether.
  EXPECT_EQ(text.find("rdmamsg_device_failed"), std::string::npos);
}

TEST(OpenMetrics, HistogramBucketsAreCumulativeWithCanonicalBounds) {
  json s = {{"node", "alpha"},
            {"peers",
             {{{"name", "beta"},
               {"state", "established"},
               {"delivery_seconds",
                {{"buckets", {{2.5e-05, 1}, {0.0001, 3}, {1.0, 4}, {10.0, 4}}},
                 {"count", 5},
                 {"sum", 2.5}}}}}}};
  const std::string text = render(s);
  EXPECT_NE(text.find(R"(rdmamsg_peer_delivery_seconds_bucket{peer="beta",le="2.5e-05"} 1)"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find(R"(le="0.0001"} 3)"), std::string::npos) << text;
  EXPECT_NE(text.find(R"(le="1.0"} 4)"), std::string::npos) << text;
  EXPECT_NE(text.find(R"(le="10.0"} 4)"), std::string::npos) << text;
  EXPECT_NE(text.find(R"(le="+Inf"} 5)"), std::string::npos) << text;
  EXPECT_NE(text.find(R"(rdmamsg_peer_delivery_seconds_sum{peer="beta"} 2.5)"), std::string::npos);
}

TEST(LatencyHistogram, ObservationsLandInTheFirstBucketThatHoldsThem) {
  LatencyHistogram h;
  h.observe(std::chrono::microseconds(10));   // <= 25 µs
  h.observe(std::chrono::microseconds(25));   // <= 25 µs (bounds are inclusive)
  h.observe(std::chrono::microseconds(300));  // <= 500 µs
  h.observe(std::chrono::seconds(60));        // above 10 s
  EXPECT_EQ(h.bucket(0), 2u);
  EXPECT_EQ(h.bucket(4), 1u);
  EXPECT_EQ(h.bucket(LatencyHistogram::kBounds.size()), 1u);
  EXPECT_EQ(h.count(), 4u);
  EXPECT_NEAR(h.sum(), 60.000335, 1e-9);
}

}  // namespace
}  // namespace rdmamsg::metrics
