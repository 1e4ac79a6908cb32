// Instance and trace readers, the plan writer, LOAD and the validator.
#include <gtest/gtest.h>
#include <unistd.h>
#include <zlib.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "memkit/planner.hpp"
#include "memkit/trace.hpp"

namespace memkit::planner {
namespace {

// The message of the planner_error that parsing `text` throws, or "" if none.
std::string parse_error(const std::string& text) {
  std::istringstream in(text);
  try {
    parse_instance(in, "A.csv");
  } catch (const planner_error& e) {
    return e.what();
  }
  return "";
}

// The message of the error that instance_from_trace(path) throws (the trace
// reader's trace_error, or planner_error), or "".
std::string from_trace_error(const std::filesystem::path& path) {
  try {
    instance_from_trace(path.string());
  } catch (const trace::trace_error& e) {
    return e.what();
  } catch (const planner_error& e) {
    return e.what();
  }
  return "";
}

std::filesystem::path temporary_path(const std::string& name) {
  return std::filesystem::temp_directory_path() /
         ("memkit_planner_" + std::to_string(::getpid()) + "_" + name);
}

TEST(PlannerInstance, ParsesAValidInstance) {
  std::istringstream in("id,lower,upper,size\n0,0,4,100\n7, 2, 6, 50\r\n\n3,4,5,1\n");
  const instance inst = parse_instance(in, "ok.csv");
  ASSERT_EQ(inst.buffers.size(), 3u);
  EXPECT_EQ(inst.buffers[1].id, 7);
  EXPECT_EQ(inst.buffers[1].lower, 2);
  EXPECT_EQ(inst.buffers[1].upper, 6);
  EXPECT_EQ(inst.buffers[1].size, 50);
}

TEST(PlannerInstance, ErrorsNameTheFunctionFileAndLine) {
  EXPECT_EQ(parse_error("id,lower,upper,size\n0,0,4,100\n1,0,4\n"),
            "[memkit::planner::parse_instance] A.csv:3: expected 4 fields, got 3");
  EXPECT_NE(parse_error("id,lower,upper,size\n0,0,x,100\n")
                .find("A.csv:2: field 'upper' is not an integer"),
            std::string::npos);
  EXPECT_NE(
      parse_error("id,lower,upper,size\n0,0,4,-5\n").find("A.csv:2: field 'size' is negative"),
      std::string::npos);
  EXPECT_NE(parse_error("id,lower,upper,size\n0,4,4,5\n").find("A.csv:2: empty lifetime"),
            std::string::npos);
  EXPECT_NE(parse_error("id,lower,upper,size\n0,1,4,0\n").find("A.csv:2: size is 0"),
            std::string::npos);
  EXPECT_NE(parse_error("id,lower,upper,size\n0,1,4,5\n\n0,2,3,1\n")
                .find("A.csv:4: duplicate id 0 (first on line 2)"),
            std::string::npos);
  EXPECT_NE(parse_error("id,size\n0,1\n").find("A.csv:1: expected the header"), std::string::npos);
  EXPECT_NE(parse_error("").find("missing the header"), std::string::npos);
  EXPECT_NE(parse_error("id,lower,upper,size\n0,1,4,5.5\n").find("A.csv:2:"), std::string::npos);
  // Input in a message is cut short and shows no control bytes.
  const std::string flood = parse_error("\x1b[31m" + std::string(100000, 'x') + "\n");
  EXPECT_LT(flood.size(), 200u);
  EXPECT_EQ(flood.find('\x1b'), std::string::npos);
  EXPECT_NE(flood.find("got '?[31mxxx"), std::string::npos) << flood;
  // Lines past 1 MiB and NUL bytes: not an instance.
  EXPECT_NE(parse_error("id,lower,upper,size\n" + std::string(2 << 20, '1') + "\n")
                .find("A.csv:2: a line longer than 1 MiB"),
            std::string::npos);
  EXPECT_NE(
      parse_error(std::string("id,lower,upper,size\n0,1,4,5\0\n", 28)).find("A.csv:2: a NUL byte"),
      std::string::npos);
  // Sizes whose sum would overflow offsets and heights.
  EXPECT_NE(parse_error("id,lower,upper,size\n0,0,10,4611686018427387904\n"
                        "1,0,10,4611686018427387904\n")
                .find("A.csv:3: the buffers' sizes sum past 2^62 bytes"),
            std::string::npos);
}

TEST(PlannerSolve, RefusesInstancesWhoseSizesSumPastTheLimit) {
  instance inst;
  inst.buffers = {{0, 0, 10, kMaxTotalBytes / 2 + 1}, {1, 0, 10, kMaxTotalBytes / 2 + 1}};
  EXPECT_THROW(solve(inst), planner_error);
  inst.buffers[1].size = kMaxTotalBytes / 2 - 1;
  EXPECT_EQ(solve(inst).height_bytes, kMaxTotalBytes);
}

TEST(PlannerInstance, ReadInstanceNamesTheFile) {
  const auto path = temporary_path("bad.csv");
  std::ofstream(path) << "id,lower,upper,size\n0,0,1,1\n1,0,1\n";
  try {
    read_instance(path.string());
    FAIL() << "expected an error";
  } catch (const planner_error& e) {
    EXPECT_EQ(std::string(e.what()),
              "[memkit::planner::read_instance] " + path.string() + ":3: expected 4 fields, got 3");
  }
  std::filesystem::remove(path);
  EXPECT_THROW(read_instance("/nonexistent/instance.csv"), planner_error);
}

TEST(PlannerInstance, WritesPlansThatReadBack) {
  instance inst;
  inst.buffers = {{4, 0, 3, 10}, {9, 1, 2, 5}};
  const plan p{{0, 10}};
  std::ostringstream out;
  write_plan(out, inst, p);
  EXPECT_EQ(out.str(), "id,lower,upper,size,offset\n4,0,3,10,0\n9,1,2,5,10\n");
}

TEST(PlannerLoad, IsTheLargestSumLiveAtOneMoment) {
  instance inst;
  EXPECT_EQ(load(inst), 0);
  // Half-open lifetimes: [0,2) and [2,4) never meet, so LOAD is 7 (from 2..3), not 12.
  inst.buffers = {{0, 0, 2, 5}, {1, 2, 4, 5}, {2, 1, 3, 2}};
  EXPECT_EQ(load(inst), 7);
  inst.buffers.push_back({3, 1, 2, 1});
  EXPECT_EQ(load(inst), 8);
}

TEST(PlannerValidate, AcceptsAValidPlan) {
  instance inst;
  inst.buffers = {{0, 0, 2, 5}, {1, 2, 4, 5}, {2, 1, 3, 2}};
  const plan p{{0, 0, 5}};
  EXPECT_TRUE(validate(inst, p).ok);
  EXPECT_TRUE(validate(inst, p, 7).ok);
  EXPECT_EQ(height(inst, p), 7);
}

TEST(PlannerValidate, CatchesOverlapsNamingBothBuffers) {
  instance inst;
  inst.buffers = {{10, 0, 2, 5}, {11, 2, 4, 5}, {12, 1, 3, 2}};
  const validation check = validate(inst, plan{{0, 0, 4}});  // 12 at [4,6) meets 10 at [0,5)
  EXPECT_FALSE(check.ok);
  EXPECT_NE(check.message.find("buffer 10"), std::string::npos) << check.message;
  EXPECT_NE(check.message.find("buffer 12"), std::string::npos) << check.message;
  EXPECT_NE(check.message.find("share bytes [4, 5)"), std::string::npos) << check.message;
  // Same offset, overlapping lifetimes.
  EXPECT_FALSE(validate(inst, plan{{0, 7, 0}}).ok);
}

TEST(PlannerValidate, CatchesCapacityAndShapeErrors) {
  instance inst;
  inst.buffers = {{0, 0, 2, 5}, {1, 1, 3, 5}};
  const validation over = validate(inst, plan{{0, 5}}, 9);
  EXPECT_FALSE(over.ok);
  EXPECT_NE(over.message.find("above the capacity 9"), std::string::npos) << over.message;
  EXPECT_FALSE(validate(inst, plan{{0}}).ok);        // one offset missing
  EXPECT_FALSE(validate(inst, plan{{-5, 5}}).ok);    // negative offset
  EXPECT_TRUE(validate(inst, plan{{0, 5}}, 10).ok);  // exactly at capacity is fine
}

TEST(PlannerValidate, CatchesOverlapsInRandomCorruptedPlans) {
  // Take a valid greedy plan, move one buffer onto another that shares a moment: the
  // validator must notice every time.
  instance inst;
  for (int i = 0; i < 60; ++i) inst.buffers.push_back({i, i % 17, i % 17 + 1 + i % 5, 1 + i % 7});
  const plan good = greedy_best_fit(inst);
  ASSERT_TRUE(validate(inst, good).ok);
  int corrupted = 0;
  for (std::size_t a = 0; a < inst.buffers.size(); ++a) {
    for (std::size_t b = 0; b < inst.buffers.size(); ++b) {
      const buffer& x = inst.buffers[a];
      const buffer& y = inst.buffers[b];
      if (a == b || x.upper <= y.lower || y.upper <= x.lower) continue;
      plan bad = good;
      bad.offsets[a] = bad.offsets[b];
      EXPECT_FALSE(validate(inst, bad).ok);
      ++corrupted;
    }
  }
  EXPECT_GT(corrupted, 100);
}

TEST(PlannerTrace, ConvertsATraceWithEventIndexTime) {
  const auto path = temporary_path("trace.csv.gz");
  {
    gzFile f = gzopen(path.c_str(), "wb");
    ASSERT_NE(f, nullptr);
    const std::string text =
        "# workload: test\n"
        "a,100,64,0\n"   // event 0
        "a,101,32,0\n"   // event 1
        "a,102,0,0\n"    // event 2, zero bytes: not planned
        "f,100\n"        // event 3
        "f,102\n"        // event 4
        "a,103,16,1\n";  // event 5, never freed
    gzwrite(f, text.data(), static_cast<unsigned>(text.size()));
    gzclose(f);
  }
  const instance inst = instance_from_trace(path.string());
  std::filesystem::remove(path);
  ASSERT_EQ(inst.buffers.size(), 3u);
  EXPECT_EQ(inst.buffers[0].lower, 0);
  EXPECT_EQ(inst.buffers[0].upper, 3);
  EXPECT_EQ(inst.buffers[1].lower, 1);
  EXPECT_EQ(inst.buffers[1].upper, 6);  // live to the end
  EXPECT_EQ(inst.buffers[2].lower, 5);
  EXPECT_EQ(inst.buffers[2].upper, 6);
  EXPECT_EQ(load(inst), 96);
}

TEST(PlannerTrace, ErrorsNameTheLine) {
  const auto path = temporary_path("bad_trace.csv");
  std::ofstream(path) << "a,1,64,0\nf,2\n";
  std::string message = from_trace_error(path);
  EXPECT_NE(message.find("[memkit::trace::read] " + path.string() + ":2: free of unknown"),
            std::string::npos)
      << message;
  std::ofstream(path) << "a,1,64,0\nx,1\n";
  EXPECT_THROW(instance_from_trace(path.string()), trace::trace_error);
  std::ofstream(path) << "a,1,4611686018427387904,0\na,2,4611686018427387904,0\n";
  message = from_trace_error(path);
  EXPECT_NE(message.find(path.string() + ":2: the buffers' sizes sum past 2^62"), std::string::npos)
      << message;
  std::filesystem::remove(path);
}

}  // namespace
}  // namespace memkit::planner
