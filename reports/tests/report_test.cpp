#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include <regex>
#include <map>
#include <set>

#include "attncheck/report.h"
#include "test_support.h"

using namespace attncheck;
using namespace attncheck::report_test;
using Catch::Matchers::Contains;

namespace {

ReportInputs fixture_inputs() {
  ReportInputs inputs;
  inputs.bench_files = {fixture("bench_single.json"), fixture("bench_repetitions.json")};
  inputs.verify_files = {fixture("verify_fused.json"), fixture("verify_naive_eigen.json")};
  return inputs;
}

const HeadlineRow& find_row(const std::vector<HeadlineRow>& rows, const std::string& impl, const std::string& config) {
  for (const HeadlineRow& row : rows)
    if (row.implementation == impl && row.configuration == config) return row;
  FAIL("no headline row for " << impl << " " << config);
  throw std::logic_error("unreachable");
}

/// The Markdown line of the headline table that starts with `| implementation |`,
/// within the block of the given configuration.
std::string headline_line(const std::string& md, const std::string& config, const std::string& impl) {
  const size_t block = md.find("**" + config + "**");
  REQUIRE(block != std::string::npos);
  const size_t end = md.find("_Conditions:", block);
  const size_t at = md.find("| " + impl + " |", block);
  REQUIRE(at != std::string::npos);
  REQUIRE(at < end);
  return md.substr(at, md.find('\n', at) - at);
}


// report.json's records (or cross_records) by benchmark name.
std::map<std::string, nlohmann::json> records_by_benchmark(const nlohmann::json& records) {
  std::map<std::string, nlohmann::json> by_name;
  for (const auto& r : records) by_name[r["benchmark"].get<std::string>()] = r;
  return by_name;
}

}  // namespace

TEST_CASE("the report builds from the fixtures without running a benchmark") {
  ScratchDir dir;
  const ReportResult result = write_report(fixture_inputs(), dir.sub("out"));
  CHECK(std::filesystem::is_regular_file(result.json_path));
  CHECK(std::filesystem::is_regular_file(result.markdown_path));
  CHECK(std::filesystem::is_regular_file(result.html_path));
  CHECK(result.html_path == dir.sub("out") + "/report.html");

  const auto report = nlohmann::json::parse(read_text(result.json_path));
  CHECK(report["json_schema_version"] == 1);
  // One record per implementation × problem: 3 implementations × 5 n + reference-double × 2 n,
  // for each of two masks, plus 2 n of the repetitions file.
  CHECK(report["records"].size() == (3 * 5 + 2) * 2 + 2);
  CHECK(report["verification"].size() == 2);
  size_t ranged = 0;
  for (const auto& record : report["records"]) {
    CHECK(record["time_seconds"].get<double>() > 0);
    CHECK(record.contains("verdict"));
    // Single runs have no range; the repetitions file's records bracket their median.
    CHECK(record["time_min_seconds"].is_null() == (record["repetitions"] == 1));
    if (record["time_min_seconds"].is_null()) continue;
    ++ranged;
    CHECK(record["time_min_seconds"].get<double>() == Approx(0.33554432e-3 * (record["problem"]["n"] == 512 ? 4 : 1)));
    CHECK(record["time_min_seconds"].get<double>() <= record["time_seconds"].get<double>());
    CHECK(record["time_max_seconds"].get<double>() >= record["time_seconds"].get<double>());
  }
  CHECK(ranged == 2);
  // 7 headline rows per mask: fused, naive-eigen, naive-openblas, reference-double; plus the d=128 fused row.
  CHECK(result.headline.size() == 4 * 2 + 1);
}

TEST_CASE("the fixture's exact n² series fits exponent 2 over n >= 256, and small series say they used all n") {
  ScratchDir dir;
  const ReportResult result = write_report(fixture_inputs(), dir.sub("out"));
  const HeadlineRow& fused = find_row(result.headline, "fused", "d=64, mask=none, threads=1");
  REQUIRE(fused.fit);
  CHECK(std::abs(fused.fit->exponent - 2) < 0.01);
  CHECK(fused.fit->n_min == 256);
  CHECK(fused.fit->n_max == 1024);
  const HeadlineRow& reference = find_row(result.headline, "reference-double", "d=64, mask=none, threads=1");
  REQUIRE(reference.fit);
  CHECK(reference.fit->all_points);
  CHECK(reference.largest_n == 128);
}

TEST_CASE("the Markdown headline holds the expected rows and numbers") {
  ScratchDir dir;
  const ReportResult result = write_report(fixture_inputs(), dir.sub("out"));
  const std::string md = read_text(result.markdown_path);
  const std::string config = "d=64, mask=none, threads=1";
  CHECK_THAT(md, Contains("| implementation | largest n | GFLOP/s | % of peak | fitted exponent | Google Benchmark fit "
                          "(RMS) | speed-up vs fused | speed-up vs naive-eigen | speed-up vs naive-openblas | speed-up "
                          "vs reference-double | verdict |"));
  const std::string fused = headline_line(md, config, "fused");
  CHECK_THAT(fused, Contains("| fused | 1024 | 60.0 | 50 % | 2.00 (n 256–1024, 3 points) | N^2 · "));
  CHECK_THAT(fused, Contains("| — | 5.00× | 2.50× | 240× (n=128) | FAIL: 1 of 4 properties (row_sum) |"));
  const std::string eigen = headline_line(md, config, "naive-eigen");
  CHECK_THAT(eigen, Contains("| naive-eigen | 1024 | 12.0 | 10 % |"));
  CHECK_THAT(eigen, Contains("| 0.200× | — | 0.500× | 48.0× (n=128) | PASS: 3 passed, 1 skipped |"));
  const std::string reference = headline_line(md, config, "reference-double");
  CHECK_THAT(reference, Contains("| reference-double | 128 | 0.250 |"));
  CHECK_THAT(reference, Contains("fewer than 2 points with n ≥ 256"));
  CHECK_THAT(reference, Contains("| not verified |"));
  // The repetitions file: the median of 1.10, 1.00 and 1.02 × the 100 GFLOP/s time (98.0), not the mean (96.2).
  const std::string repeated = headline_line(md, "d=128, mask=none, threads=2", "fused");
  CHECK_THAT(repeated, Contains("| fused | 512 | 98.0 | 41 % |"));
  // Its measurements table: the fastest and slowest of the three repetitions and their spread.
  CHECK_THAT(md, Contains("| fused | 256 | 0.342 ms | 98.0 | 41 % | — | median of 3 (0.336–0.369 ms, spread 9.8 %) |"));
  CHECK_THAT(md, Contains("| fused | 512 | 1.37 ms | 98.0 | 41 % | — | median of 3 (1.34–1.48 ms, spread 9.8 %) |"));
  // Conditions under the tables.
  // The 1-thread runs name the CPU the bench placed them on (as the single-run file says); runs on
  // more threads are not placed.
  CHECK_THAT(md, Contains("AMD EPYC 9R45 (fixture) (2 logical CPUs), 1 thread on CPU 0, g++ 12.2.0 -O3 -DNDEBUG, SIMD "
                          "target AVX3_ZEN4, single run (1 repetition), wall time, load average 0.12"));
  CHECK_THAT(md, Contains("(2 logical CPUs), 2 threads, g++ 12.2.0 -O3 -DNDEBUG, SIMD target AVX3_ZEN4, median of 3 "
                          "repetitions"));
  // Where the bench placed its tensors, when the file says (the single-run file predates the field).
  CHECK_THAT(md, Contains("median of 3 repetitions, wall time, tensors 16 bytes past a 64-byte boundary, load average"));
  CHECK_THAT(md, !Contains("single run (1 repetition), wall time, tensors"));
  // ... and the widest spread of its repetitions; the single runs state none.
  CHECK_THAT(md, Contains("; repetitions spread by up to 9.8 % (fused, n = "));
  CHECK_THAT(md, Contains("): smaller differences are noise. × FMA floor is the time over"));
  size_t spreads = 0;
  for (size_t at = md.find("repetitions spread by"); at != std::string::npos; at = md.find("repetitions spread by", at + 1))
    ++spreads;
  CHECK(spreads == 2);  // the d=128 configuration's headline and measurements tables
  // Every table states its conditions: a headline and a measurements table per configuration (3), and
  // a property table per verify file (2).
  size_t conditions = 0;
  for (size_t at = md.find("_Conditions: "); at != std::string::npos; at = md.find("_Conditions: ", at + 1)) ++conditions;
  CHECK(conditions == 3 * 2 + 2);
}

TEST_CASE("the Markdown lists each property and the failed one's counterexample") {
  ScratchDir dir;
  const ReportResult result = write_report(fixture_inputs(), dir.sub("out"));
  const std::string md = read_text(result.markdown_path);
  CHECK_THAT(md, Contains("## Verification: fused (fp32)"));
  CHECK_THAT(md, Contains("| row_sum | FAILED | 7 |"));
  CHECK_THAT(md, Contains("| temperature_limits | SKIPPED |"));
  CHECK_THAT(md, Contains("implementation does not support temperature"));
  CHECK_THAT(md, Contains("### Counterexample: row_sum (FAILED)"));
  CHECK_THAT(md, Contains("attncheck-failures/row_sum-1a2b.json"));
  CHECK_THAT(md, Contains("implementation A (slice [0,0])"));
  CHECK_THAT(md, Contains("| 0 | 0.2906 | 0.08502 | 0.1142 | 0.4891 |"));
  CHECK_THAT(md, Contains("| column_softmax | true | row_sum |"));
}

TEST_CASE("the HTML is a single file whose charts are inline SVG with no external references") {
  ScratchDir dir;
  const ReportResult result = write_report(fixture_inputs(), dir.sub("out"));
  const std::string html = read_text(result.html_path);
  // time and GFLOP/s for three configurations, error vs n for two verify files, one counterexample.
  size_t svgs = 0;
  for (size_t at = html.find("<svg"); at != std::string::npos; at = html.find("<svg", at + 1)) ++svgs;
  CHECK(svgs == 3 * 2 + 2 + 1);
  CHECK(html.find("http") == std::string::npos);
  CHECK(html.find("src=") == std::string::npos);
  CHECK(html.find("<script") == std::string::npos);
  CHECK(html.find("<link") == std::string::npos);
  CHECK(html.find("<?xml") == std::string::npos);
  CHECK(html.find("<!DOCTYPE svg") == std::string::npos);
  // Every reference points inside the page, and no id is defined twice.
  const std::regex href(R"(href=['"]([^'"]*)['"])");
  for (auto it = std::sregex_iterator(html.begin(), html.end(), href); it != std::sregex_iterator(); ++it)
    CHECK((*it)[1].str().rfind('#', 0) == 0);
  const std::regex url(R"(url\(([^)]*)\))");
  for (auto it = std::sregex_iterator(html.begin(), html.end(), url); it != std::sregex_iterator(); ++it)
    CHECK((*it)[1].str().rfind('#', 0) == 0);
  // gnuplot repeats some ids within one chart; no id may appear in two charts.
  const std::regex id(R"(\sid=['"]([^'"]*)['"])");
  std::map<std::string, size_t> chart_of_id;
  size_t chart = 0;
  for (size_t at = html.find("<svg"); at != std::string::npos; at = html.find("<svg", at + 1), ++chart) {
    const std::string svg = html.substr(at, html.find("</svg>", at) - at);
    for (auto it = std::sregex_iterator(svg.begin(), svg.end(), id); it != std::sregex_iterator(); ++it) {
      const auto [where, inserted] = chart_of_id.emplace((*it)[1].str(), chart);
      if (!inserted) CHECK(where->second == chart);
    }
  }
  CHECK(chart_of_id.size() > 9);
  // gnuplot drew them: its marker is in each chart, and the legends carry the fit.
  CHECK_THAT(html, Contains("Produced by GNUPLOT"));
  CHECK_THAT(html, Contains("fused: exponent 2.00 (n 256-1024)"));
  CHECK_THAT(html, Contains("n² guide"));
  CHECK_THAT(html, Contains("measured peak"));
  CHECK_THAT(html, Contains("fused counterexample: row_sum (slice [0,0])"));
  CHECK_THAT(html, Contains("Error / bound vs n: fused"));
  // Every chart states its conditions.
  size_t conditions = 0;
  for (size_t at = html.find("AMD EPYC 9R45 (fixture)"); at != std::string::npos;
       at = html.find("AMD EPYC 9R45 (fixture)", at + 1))
    ++conditions;
  CHECK(conditions >= 2 * svgs);  // in the chart and in its caption
}

TEST_CASE("the charts are also written as standalone SVG files") {
  ScratchDir dir;
  const ReportResult result = write_report(fixture_inputs(), dir.sub("out"));
  CHECK(result.chart_paths.size() == 9);
  for (const std::string& path : result.chart_paths) {
    const std::string svg = read_text(path);
    CHECK_THAT(svg, Contains("<svg"));
    CHECK_THAT(svg, Contains("</svg>"));
  }
}

TEST_CASE("format_headline prints one aligned line per headline row") {
  ScratchDir dir;
  const ReportResult result = write_report(fixture_inputs(), dir.sub("out"));
  const std::string text = format_headline(result.headline);
  CHECK(std::count(text.begin(), text.end(), '\n') == static_cast<long>(result.headline.size()) + 1);
  CHECK_THAT(text, Contains("vs naive-eigen 5.00×"));
  CHECK_THAT(text, Contains("FAIL: 1 of 4 properties (row_sum)"));
}

TEST_CASE("a cross shape is judged only against a read floor timed in its own bench run") {
  ScratchDir dir;
  // The fixture split in two files: the floor alone in the second, timed at another time than fused.
  const auto doc = nlohmann::json::parse(read_text(fixture("bench_decode.json")));
  nlohmann::json without_floor = doc, floor_only = doc;
  without_floor["benchmarks"] = nlohmann::json::array();
  floor_only["benchmarks"] = nlohmann::json::array();
  for (const auto& b : doc["benchmarks"])
    (b["name"].get<std::string>().rfind("read-floor/", 0) == 0 ? floor_only : without_floor)["benchmarks"].push_back(b);
  REQUIRE(floor_only["benchmarks"].size() == 2);
  for (const auto& [name, part] : {std::pair{"first.json", without_floor}, std::pair{"second.json", floor_only}}) {
    std::ofstream out(dir.sub(name));
    out << part.dump(2);
  }
  ReportInputs inputs;
  inputs.bench_files = {dir.sub("first.json"), dir.sub("second.json")};
  const ReportResult result = write_report(inputs, dir.sub("out"));
  const auto report = nlohmann::json::parse(read_text(result.json_path));
  bool seen = false;
  for (const auto& r : report["cross_records"]) {
    if (r["benchmark"] != "fused/n_q:1/n_k:16384/d:128/mask:none/threads:1") continue;
    seen = true;
    CHECK(r["over_read_floor"].is_null());  // the same shape's floor, but from another run
  }
  CHECK(seen);
  CHECK_THAT(read_text(result.markdown_path),
             Contains("| fused | 1 | 16384 | 128 | none | 1 | 2.10 ms | 32.0 | 16.0 | 0.500 | memory, 40.0 GB/s | "
                      "80 % | — |"));
}

TEST_CASE("thread scaling sets each shape's speed-up beside its floors' own, within one bench run") {
  ScratchDir dir;
  auto doc = nlohmann::json::parse(read_text(fixture("bench_decode.json")));
  // Floors on 2 threads beside the fixture's 1-thread ones (1.75 and 0.5 ms for n_q = 1; 0.6 and 3.2 for 64).
  for (const auto& [name, ms] : {std::pair{"read-floor/n_q:1/n_k:16384/d:128/mask:none/threads:2", 1.25},
                                 std::pair{"fma-floor/n_q:1/n_k:16384/d:128/mask:none/threads:2", 0.27},
                                 std::pair{"read-floor/n_q:64/n_k:4096/d:128/mask:none/threads:2", 0.5},
                                 std::pair{"fma-floor/n_q:64/n_k:4096/d:128/mask:none/threads:2", 1.7}})
    doc["benchmarks"].push_back({{"name", name}, {"run_name", name}, {"run_type", "iteration"},
                                 {"family_index", 9}, {"per_family_instance_index", 0}, {"repetitions", 1},
                                 {"repetition_index", 0}, {"threads", 1}, {"iterations", 10}, {"real_time", ms},
                                 {"cpu_time", ms}, {"time_unit", "ms"}});
  {
    std::ofstream out(dir.sub("both.json"));
    out << doc.dump(2);
  }
  ReportInputs inputs;
  inputs.bench_files = {dir.sub("both.json")};
  ReportResult result = write_report(inputs, dir.sub("out"));
  auto report = nlohmann::json::parse(read_text(result.json_path));
  // fused on both counts, twice; exec:fake ran on 1 thread only; floors are the columns, not rows.
  REQUIRE(report["thread_scaling"].size() == 2);
  const auto& decode = report["thread_scaling"][0];
  CHECK(decode["implementation"] == "fused");
  CHECK(decode["problem"]["n_q"] == 1);
  CHECK(decode["threads"] == 2);
  CHECK(decode["speedup"].get<double>() == Approx(2.1 / 1.7));
  CHECK(decode["read_floor_speedup"].get<double>() == Approx(1.75 / 1.25));
  CHECK(decode["fma_floor_speedup"].get<double>() == Approx(0.5 / 0.27));
  // The roofline is the slower floor at each count: the read floor's here.
  CHECK(decode["roofline_speedup"].get<double>() == Approx(1.75 / 1.25));
  CHECK(decode["over_roofline_speedup"].get<double>() == Approx((2.1 / 1.7) / (1.75 / 1.25)));
  const auto& cross = report["thread_scaling"][1];
  CHECK(cross["problem"]["n_q"] == 64);
  CHECK(cross["speedup"].get<double>() == Approx(4.0 / 2.5));
  CHECK(cross["roofline_speedup"].get<double>() == Approx(3.2 / 1.7));  // the FMA floor's
  const std::string md = read_text(result.markdown_path);
  CHECK_THAT(md, Contains("## Thread scaling"));
  CHECK_THAT(md, Contains("| fused | n_q = 1, n_k = 16384 | 128 | none | 2 | 2.10 ms | 1.70 ms | 1.24 | 1.40 | 1.85 | "
                          "1.40 | 0.882 |"));
  CHECK_THAT(md, Contains("| fused | n_q = 64, n_k = 4096 | 128 | none | 2 | 4.00 ms | 2.50 ms | 1.60 | 1.20 | 1.88 | "
                          "1.88 | 0.850 |"));
  CHECK_THAT(read_text(result.html_path), Contains("<h2>Thread scaling</h2>"));

  // The fixture alone has no floor on 2 threads: speed-ups without floors.
  inputs.bench_files = {fixture("bench_decode.json")};
  result = write_report(inputs, dir.sub("plain"));
  report = nlohmann::json::parse(read_text(result.json_path));
  REQUIRE(report["thread_scaling"].size() == 2);
  CHECK(report["thread_scaling"][0]["read_floor_speedup"].is_null());
  CHECK(report["thread_scaling"][0]["roofline_speedup"].is_null());
  CHECK(report["thread_scaling"][0]["over_roofline_speedup"].is_null());

  // 1 and 2 threads from different bench runs are not paired.
  nlohmann::json one = doc, two = doc;
  one["benchmarks"] = two["benchmarks"] = nlohmann::json::array();
  for (const auto& b : doc["benchmarks"])
    (b["name"].get<std::string>().find("/threads:2") != std::string::npos ? two : one)["benchmarks"].push_back(b);
  for (const auto& [name, part] : {std::pair{"one.json", one}, std::pair{"two.json", two}}) {
    std::ofstream out(dir.sub(name));
    out << part.dump(2);
  }
  inputs.bench_files = {dir.sub("one.json"), dir.sub("two.json")};
  result = write_report(inputs, dir.sub("split"));
  CHECK(nlohmann::json::parse(read_text(result.json_path))["thread_scaling"].empty());
  CHECK_THAT(read_text(result.markdown_path), !Contains("## Thread scaling"));
}

TEST_CASE("floors timed call by call beside an implementation judge it in place of the floors' rows") {
  ScratchDir dir;
  auto doc = nlohmann::json::parse(read_text(fixture("bench_decode.json")));
  // bench --paired-floors on fused n_q = 1 (1 and 2 threads): its ratios, different from the floor rows' (1.2 and 4.2).
  const auto pair = [&](const std::string& name, double read_s, double fma_s, double over_read, double over_fma) {
    for (auto& b : doc["benchmarks"]) {
      if (b["name"] != name) continue;
      b["read_floor_seconds"] = read_s;
      b["fma_floor_seconds"] = fma_s;
      b["over_read_floor"] = over_read;
      b["over_fma_floor"] = over_fma;
      b["over_roofline"] = std::min(over_read, over_fma);
    }
  };
  pair("fused/n_q:1/n_k:16384/d:128/mask:none/threads:1", 2.0e-3, 0.4e-3, 1.05, 5.0);
  pair("fused/n_q:1/n_k:16384/d:128/mask:none/threads:2", 1.0e-3, 0.2e-3, 1.5, 7.0);
  const auto write = [&](const std::string& name, const nlohmann::json& content) {
    std::ofstream out(dir.sub(name));
    out << content.dump(2);
  };
  write("paired.json", doc);
  ReportInputs inputs;
  inputs.bench_files = {dir.sub("paired.json")};
  const ReportResult result = write_report(inputs, dir.sub("out"));
  const auto report = nlohmann::json::parse(read_text(result.json_path));
  const std::map<std::string, nlohmann::json> by_name = records_by_benchmark(report["cross_records"]);
  const auto& one = by_name.at("fused/n_q:1/n_k:16384/d:128/mask:none/threads:1");
  CHECK(one["floors_paired"] == true);
  CHECK(one["over_read_floor"].get<double>() == Approx(1.05));
  CHECK(one["over_fma_floor"].get<double>() == Approx(5.0));
  CHECK(one["over_slower_floor"].get<double>() == Approx(1.05));
  // Unpaired: the floor rows of its run, as before.
  const auto& cross = by_name.at("fused/n_q:64/n_k:4096/d:128/mask:none/threads:1");
  CHECK(cross["floors_paired"] == false);
  CHECK(cross["over_slower_floor"].get<double>() == Approx(4.0 / 3.2));
  // Thread scaling takes the paired floors' own times at both counts: read 2.0 / 1.0, FMA 0.4 / 0.2.
  bool scaled = false;
  for (const auto& t : report["thread_scaling"]) {
    if (t["problem"]["n_q"] != 1) continue;
    scaled = true;
    CHECK(t["read_floor_speedup"].get<double>() == Approx(2.0));
    CHECK(t["roofline_speedup"].get<double>() == Approx(2.0));
  }
  CHECK(scaled);
  {
    // Paired on 2 threads only: the floor rows at both counts (none on 2 threads here), never one of each.
    auto half = doc;
    for (auto& b : half["benchmarks"])
      if (b["name"] == "fused/n_q:1/n_k:16384/d:128/mask:none/threads:1")
        for (const char* key : {"read_floor_seconds", "fma_floor_seconds", "over_read_floor", "over_fma_floor",
                                "over_roofline"})
          b.erase(key);
    write("half.json", half);
    inputs.bench_files = {dir.sub("half.json")};
    const auto half_report = nlohmann::json::parse(read_text(write_report(inputs, dir.sub("half")).json_path));
    for (const auto& t : half_report["thread_scaling"])
      if (t["problem"]["n_q"] == 1) CHECK(t["read_floor_speedup"].is_null());
  }
  const std::string md = read_text(result.markdown_path);
  CHECK_THAT(md, Contains("| 1.05 (paired) | 5.00 (paired) | 1.05 (paired) |"));
  CHECK_THAT(md, Contains("A ratio marked (paired) comes from a run with --paired-floors"));

  // The counters come together, each a positive number: otherwise an error naming the benchmark and counter.
  auto partial = doc;
  for (auto& b : partial["benchmarks"])
    if (b["name"] == "fused/n_q:1/n_k:16384/d:128/mask:none/threads:1") b.erase("over_roofline");
  write("partial.json", partial);
  inputs.bench_files = {dir.sub("partial.json")};
  CHECK_THROWS_WITH(write_report(inputs, dir.sub("partial")),
                    Contains("benchmark 'fused/n_q:1/n_k:16384/d:128/mask:none/threads:1': the paired-floor counters "
                             "come together") && Contains("4 of 5 found"));
  auto negative = doc;
  for (auto& b : negative["benchmarks"])
    if (b["name"] == "fused/n_q:1/n_k:16384/d:128/mask:none/threads:2") b["over_fma_floor"] = -1.0;
  write("negative.json", negative);
  inputs.bench_files = {dir.sub("negative.json")};
  CHECK_THROWS_WITH(write_report(inputs, dir.sub("negative")),
                    Contains("counter 'over_fma_floor' must be a positive number"));
  CHECK_FALSE(std::filesystem::exists(dir.sub("partial")));
  CHECK_FALSE(std::filesystem::exists(dir.sub("negative")));
}

TEST_CASE("square shapes are judged against an FMA floor timed in the same run, of the same n, mask and threads") {
  ScratchDir dir;
  auto doc = nlohmann::json::parse(read_text(fixture("bench_single.json")));
  // fma-floor rows beside fused's n = 1024 (4.47 ms) and n = 512: half and a quarter of fused's time,
  // and one for the causal mask at n = 1024.
  for (const auto& [shape, ms] : {std::pair{"n:1024/d:64/mask:none", 4.473924266666667 / 2},
                                  std::pair{"n:512/d:64/mask:none", 1.1184810666666667 / 4},
                                  std::pair{"n:1024/d:64/mask:causal", 2.2391466666666666 / 1.6}}) {
    const std::string name = std::string("fma-floor/") + shape + "/threads:1";
    doc["benchmarks"].push_back({{"name", name}, {"run_name", name}, {"run_type", "iteration"},
                                 {"family_index", 9}, {"per_family_instance_index", 0}, {"repetitions", 1},
                                 {"repetition_index", 0}, {"threads", 1}, {"iterations", 10}, {"real_time", ms},
                                 {"cpu_time", ms}, {"time_unit", "ms"}});
  }
  {
    std::ofstream out(dir.sub("square.json"));
    out << doc.dump(2);
  }
  ReportInputs inputs;
  inputs.bench_files = {dir.sub("square.json")};
  const ReportResult result = write_report(inputs, dir.sub("out"));
  const auto report = nlohmann::json::parse(read_text(result.json_path));
  const std::map<std::string, nlohmann::json> by_name = records_by_benchmark(report["records"]);
  CHECK(by_name.at("fused/n:1024/d:64/mask:none/threads:1")["over_fma_floor"].get<double>() == Approx(2.0));
  CHECK(by_name.at("fused/n:512/d:64/mask:none/threads:1")["over_fma_floor"].get<double>() == Approx(4.0));
  CHECK(by_name.at("fused/n:1024/d:64/mask:causal/threads:1")["over_fma_floor"].get<double>() == Approx(1.6));
  CHECK(by_name.at("fused/n:256/d:64/mask:none/threads:1")["over_fma_floor"].is_null());  // no floor of that n
  CHECK(by_name.at("naive-eigen/n:1024/d:64/mask:none/threads:1")["over_fma_floor"].get<double>() == Approx(10.0));
  CHECK(by_name.at("fma-floor/n:1024/d:64/mask:none/threads:1")["over_fma_floor"].is_null());
  const std::string md = read_text(result.markdown_path);
  CHECK_THAT(md, Contains("| fused | 1024 | 4.47 ms |"));
  CHECK_THAT(md, Contains(" | 2.00 | single run |"));
  CHECK_THAT(md, Contains("× FMA floor is the time over the fma-floor row"));
  // In the headline the floor is a row of its own, with nothing to verify.
  CHECK_THAT(md, Contains("| a floor, not attention |"));
  CHECK(by_name.at("fma-floor/n:1024/d:64/mask:none/threads:1")["verdict"] == "a floor, not attention");
  CHECK(by_name.at("naive-eigen/n:1024/d:64/mask:none/threads:1")["verdict"] == "not verified");
}

TEST_CASE("a bench file with only aggregates (--benchmark_report_aggregates_only) uses the _median rows") {
  ScratchDir dir;
  auto doc = nlohmann::json::parse(read_text(fixture("bench_repetitions.json")));
  nlohmann::json kept = nlohmann::json::array();
  for (const auto& b : doc["benchmarks"])
    if (b["run_type"] == "aggregate") kept.push_back(b);
  doc["benchmarks"] = kept;
  {
    std::ofstream out(dir.sub("aggregates.json"));
    out << doc.dump(2);
  }
  ReportInputs inputs;
  inputs.bench_files = {dir.sub("aggregates.json")};
  const ReportResult result = write_report(inputs, dir.sub("out"));
  REQUIRE(result.headline.size() == 1);
  REQUIRE(result.headline[0].gflops);
  CHECK(*result.headline[0].gflops == Approx(100 / 1.02));
  const auto report = nlohmann::json::parse(read_text(result.json_path));
  CHECK(report["records"][0]["time_statistic"] == "median");
  CHECK(report["records"][0]["repetitions"] == 3);
  // Without the repetitions' own rows their range is unknown: null, and not printed.
  CHECK(report["records"][0]["time_min_seconds"].is_null());
  CHECK(report["records"][0]["time_max_seconds"].is_null());
  CHECK_THAT(read_text(result.markdown_path), Contains("| median of 3 |"));
}

TEST_CASE("a benchmark that reported an error is listed with its message, the rest is reported") {
  ScratchDir dir;
  ReportInputs inputs;
  inputs.bench_files = {fixture("bench_with_error.json")};
  const ReportResult result = write_report(inputs, dir.sub("out"));
  REQUIRE(result.headline.size() == 1);
  CHECK(result.headline[0].largest_n == 64);
  CHECK_FALSE(result.headline[0].fit);  // one n left: no exponent
  const std::string md = read_text(result.markdown_path);
  CHECK_THAT(md, Contains("- `reference-double/n:128/d:64/mask:none/threads:1`: std::bad_alloc: cannot allocate the n x n weights"));
  CHECK_THAT(read_text(result.html_path), Contains("std::bad_alloc: cannot allocate the n x n weights"));
  const auto report = nlohmann::json::parse(read_text(result.json_path));
  REQUIRE(report["failed_benchmarks"].size() == 1);
  CHECK(report["records"].size() == 1);
}

TEST_CASE("the report may share its directory with its inputs; only its own files are replaced") {
  ScratchDir dir;
  const std::filesystem::path out = dir.sub("attncheck-report");
  std::filesystem::create_directories(out / "charts");
  std::filesystem::copy_file(fixture("bench_repetitions.json"), out / "bench.json");
  { std::ofstream(out / "charts" / "stale-chart.svg") << "<svg></svg>"; }
  ReportInputs inputs;
  inputs.bench_files = {(out / "bench.json").string()};
  write_report(inputs, out.string());
  CHECK(std::filesystem::exists(out / "bench.json"));
  CHECK_FALSE(std::filesystem::exists(out / "charts" / "stale-chart.svg"));
  CHECK(std::filesystem::exists(out / "charts" / "time-d128-none-t2.svg"));
  // A second run over the same directory works the same.
  write_report(inputs, out.string());
  CHECK(std::filesystem::exists(out / "report.html"));
}

TEST_CASE("an implementation that was only verified gets a headline row with its verification conditions") {
  ScratchDir dir;
  ReportInputs inputs;
  inputs.verify_files = {fixture("verify_fused.json")};
  const ReportResult result = write_report(inputs, dir.sub("out"));
  REQUIRE(result.headline.size() == 1);
  CHECK(result.headline[0].configuration.empty());
  const std::string md = read_text(result.markdown_path);
  CHECK_THAT(md, Contains("**verified only (not benchmarked)**"));
  CHECK_THAT(md, Contains("| fused | FAIL: 1 of 4 properties (row_sum) |\n\n_Conditions: fused: AMD EPYC 9R45 (fixture), "
                          "1 core(s), g++ 12.2.0 -O3 -DNDEBUG, SIMD target AVX3_ZEN4, seed 12345"));
}

TEST_CASE("the property table shows inconclusive and declined counts, the flag and the notes (version 2)") {
  ScratchDir dir;
  ReportInputs inputs;
  inputs.verify_files = {fixture("verify_v2_inconclusive.json"), fixture("verify_fused.json")};
  const ReportResult result = write_report(inputs, dir.sub("out"));
  const std::string md = read_text(result.markdown_path);
  CHECK_THAT(md, Contains("| property | status | cases | inconclusive | declined (out of range) | seconds | worst error / bound | oracle | notes |"));
  CHECK_THAT(md, Contains("| shape | PASSED | 100 | 0 | 3 | 0.500 | — | — | declined as out of range (accepted): declined a case "
                          "out of range for bf16 (row [0][0][2]: the logit of key 1 overflows bf16 arithmetic): too big; "
                          "note: flushes weights below 2^-120 to zero |"));
  CHECK_THAT(md, Contains("| differential_reference | PASSED | 100 | 30 | 0 |"));
  CHECK_THAT(md, Contains("FLAG: 30 of 130 checked cases (23 %) inconclusive: row [0][0][0]: logit error 0.7 is not small"));
  CHECK_THAT(md, Contains("| temperature_zero_limit | INCONCLUSIVE | 4 | 101 | 0 |"));
  CHECK_THAT(md, Contains("only 4 of 100 cases could be judged"));
  CHECK_THAT(md, Contains("| mask_zero | SKIPPED | 0 | 0 | 1001 |"));
  CHECK_THAT(md, Contains("the implementation declined every case (1001) as out of range"));
  // Version 1 files have no counts: a dash, not a zero.
  CHECK_THAT(md, Contains("| row_sum | FAILED | 7 | — | — |"));
  // INCONCLUSIVE is not a pass.
  CHECK_THAT(md, Contains("**INCONCLUSIVE: 1 of 4 properties (temperature_zero_limit)**"));
  const std::string html = read_text(result.html_path);
  CHECK_THAT(html, Contains("<td class=\"warn\">INCONCLUSIVE</td>"));
  CHECK_THAT(html, Contains("<td>declined as out of range (accepted): declined a case out of range for bf16"));
  CHECK_THAT(html, Contains("note: flushes weights below 2^-120 to zero"));
  CHECK_THAT(html, Contains("<strong class=\"warn\">INCONCLUSIVE: 1 of 4 properties"));
}

TEST_CASE("the report shows each mutant's verdict, expected killers and the kill matrix (version 2)") {
  ScratchDir dir;
  ReportInputs inputs;
  inputs.verify_files = {fixture("verify_v2_mutants.json")};
  const ReportResult result = write_report(inputs, dir.sub("out"));
  const std::string md = read_text(result.markdown_path);
  CHECK_THAT(md, Contains("| mutant | killed | killed by | expected killers | verdict | case |"));
  CHECK_THAT(md, Contains("| mutant:column_softmax | true | row_sum | row_sum, differential_reference | KILLED_AS_EXPECTED | b1h1q1k2d1 |"));
  CHECK_THAT(md, Contains("| mutant:overflow_zeros | false | — | row_sum, differential_reference | ESCAPED | — |"));
  CHECK_THAT(md, Contains("| mutant | shape | row_sum | differential_reference |"));
  CHECK_THAT(md, Contains("| mutant:column_softmax | . | [K] | [K] |"));
  CHECK_THAT(md, Contains("| mutant:overflow_zeros | . | [i] | [C] |"));
  CHECK_THAT(md, Contains("| mutant:tau_multiplied | K | G | . |"));
  // Escaped and unexpectedly killed mutants fail the run's verdict.
  CHECK_THAT(md, Contains("**FAIL: 2 of 3 mutants (mutant:overflow_zeros ESCAPED, mutant:tau_multiplied KILLED_UNEXPECTEDLY)**"));
  const std::string html = read_text(result.html_path);
  CHECK_THAT(html, Contains("<h4>Kill matrix</h4>"));
  CHECK_THAT(html, Contains("<td class=\"fail\">ESCAPED</td>"));
  CHECK(result.headline.size() == 1);
  CHECK_THAT(result.headline[0].verdict, Contains("FAIL: 2 of 3 mutants"));
}

namespace {

/// A stand-in for gnuplot that keeps each script it is given (chart-<k>.gp in
/// `dir`) and prints an empty SVG: the tests read the charts' data from the scripts.
std::string recording_gnuplot(const ScratchDir& dir) {
  const std::string path = dir.sub("record-gnuplot.sh");
  std::ofstream(path) << "#!/bin/sh\n"
                      << "k=$(ls " << dir.sub("") << " | grep -c '^chart-')\n"
                      << "cp \"$1\" " << dir.sub("") << "/chart-$k.gp\n"
                      << "echo '<svg xmlns=\"http://www.w3.org/2000/svg\"></svg>'\n";
  std::filesystem::permissions(path, std::filesystem::perms::owner_all);
  return path;
}

/// The recorded script whose title (gnuplot label 901) starts with `title`.
std::string script_titled(const ScratchDir& dir, const std::string& title) {
  for (const auto& entry : std::filesystem::directory_iterator(dir.path)) {
    if (entry.path().filename().string().rfind("chart-", 0) != 0) continue;
    const std::string text = read_text(entry.path());
    if (text.find("set label 901 \"" + title) != std::string::npos) return text;
  }
  FAIL("no chart titled " << title);
  return "";
}

}  // namespace

TEST_CASE("a power file gives error/bound and ε vs n charts and a table, and is the Error vs n of what it measured") {
  ScratchDir dir, scripts;
  ReportInputs inputs;
  inputs.verify_files = {fixture("verify_fused.json"), fixture("verify_naive_eigen.json")};
  inputs.power_file = fixture("power_small.json");
  inputs.gnuplot = recording_gnuplot(scripts);
  const ReportResult result = write_report(inputs, dir.sub("out"));
  std::set<std::string> names;
  for (const std::string& path : result.chart_paths) names.insert(std::filesystem::path(path).filename().string());
  CHECK(names.count("tightness-vs-n.svg"));
  CHECK(names.count("power-vs-n.svg"));

  // Error / bound vs n, log-log: one line per implementation × input × mask, the bound at 1.
  const std::string tightness = script_titled(scripts, "Error / bound vs n: fused and naive-fp32");
  CHECK_THAT(tightness, Contains("set logscale x 2\nset logscale y 10\n"));
  CHECK_THAT(tightness, Contains("$p7 << EOD"));
  CHECK(tightness.find("$p8 << EOD") == std::string::npos);
  CHECK_THAT(tightness, Contains("title \"naive-fp32, N(0, 1), mask causal\""));
  CHECK_THAT(tightness, Contains("$p4 << EOD\n16 0.0114123107\n64 0.0112484832\n4096 0.0071391471\nEOD"));  // naive-fp32, uniform, none
  CHECK_THAT(tightness, Contains("1 with lines dt 2 lw 2 lc rgb \"#000000\" title \"bound\""));
  CHECK_THAT(tightness, Contains("AMD EPYC (2 logical CPUs), 1 thread, load average 4.3 at the start, 4.0 at the end"));
  // The smallest ε caught: one line per input × mask, n across.
  const std::string power = script_titled(scripts, "Smallest relative error caught vs n: fused");
  CHECK_THAT(power, Contains("title \"U[-1, 1], mask causal\""));
  CHECK_THAT(power, Contains("16 1.63264072e-05\n64 4.23121257e-05\n4096 0.000621872242\n"));
  // fused's Error vs n is the power file's (n up to 4096, both inputs), not its verify file's n ≤ 64;
  // naive-eigen, which the power file did not measure, keeps its verify file's.
  const std::string fused = script_titled(scripts, "Error / bound vs n: fused;");
  CHECK_THAT(fused, Contains("title \"N(0, 1), mask none\""));
  CHECK_THAT(fused, Contains("4096 0.00418054169\n"));
  CHECK(fused.find("naive-fp32") == std::string::npos);
  CHECK_THAT(script_titled(scripts, "Error / bound vs n: naive-eigen"), Contains("d=64, mask=none"));

  const std::string md = read_text(result.markdown_path);
  CHECK_THAT(md, Contains("## Tightness and power of the tolerance model"));
  CHECK_THAT(md, Contains("| n | n_q × n_k | input | mask | fused error / bound | naive-fp32 error / bound | "
                          "bound ÷ worst error (fused) | smallest ε caught (fused) | oracle |"));
  CHECK_THAT(md, Contains("| 4096 | 256×4096 | uniform | none | 0.00418 | 0.00714 | 239× | 6.22e-04 | long double |"));
  CHECK_THAT(md, Contains("| 16 | 16×16 | normal | causal | 0.0222 | 0.0189 | 45.1× | 4.18e-06 | mp50 |"));
  CHECK_THAT(md, Contains("_Conditions: AMD EPYC (2 logical CPUs), 1 thread, load average 4.3 at the start, 4.0 at "
                          "the end; g++ 12.2.0 -O3 -DNDEBUG (Release), SIMD target AVX3, 2026-12-01T00:59:53Z; d = 64, "
                          "b = h = 1; from n = 4096, 256 evenly spaced query rows against all n keys."));
  const size_t fused_at = md.find("## Verification: fused"), eigen_at = md.find("## Verification: naive-eigen");
  const size_t fused_row = md.find("| 4096 | 256×4096 | uniform | none | 8.75e-08 | 0.00418 | PASSED | long double |");
  REQUIRE(fused_row != std::string::npos);
  CHECK((fused_at < fused_row && fused_row < eigen_at));
  CHECK(md.find("| n | d | mask | max abs error | error / bound | oracle |", eigen_at) != std::string::npos);

  const auto report = nlohmann::json::parse(read_text(result.json_path));
  CHECK(report["inputs"]["power"] == fixture("power_small.json"));
  CHECK(report["power"]["rows"].size() == 12);
  CHECK(report["power"]["power_json_version"] == 1);
  CHECK(report["verification"][0]["error_vs_n_shown_from"] == "power");
  CHECK(report["verification"][1]["error_vs_n_shown_from"] == "verify");
  const std::string html = read_text(result.html_path);
  CHECK_THAT(html, Contains("<h2>Tightness and power of the tolerance model</h2>\n<figure id=\"tightness-vs-n\">"));
  CHECK_THAT(html, Contains("<figure id=\"power-vs-n\">"));
}

TEST_CASE("a power row that failed, or whose ε was never caught, is shown as such") {
  ScratchDir dir;
  auto doc = nlohmann::json::parse(read_text(fixture("power_small.json")));
  doc["rows"][0]["tightness"]["naive-fp32"] = {{"error_over_bound", "inf"}, {"max_abs_error", 1.0},
                                               {"verdict", "FAILED"}, {"message", "O[0][0][3][1] is NaN"}};
  doc["rows"][1]["power"]["caught_at_highest"] = false;
  doc["rows"][1]["power"]["smallest_epsilon_caught"] = nullptr;
  doc["rows"][1]["power"]["largest_epsilon_missed"] = 0.1;
  std::ofstream(dir.sub("power.json")) << doc.dump(2);
  ReportInputs inputs;
  inputs.power_file = dir.sub("power.json");
  const ReportResult result = write_report(inputs, dir.sub("out"));  // the power file alone is a report
  const std::string md = read_text(result.markdown_path);
  CHECK_THAT(md, Contains("| 16 | 16×16 | uniform | none | 0.00965 | inf FAILED | 104× | 1.63e-05 | mp50 |"));
  CHECK_THAT(md, Contains("| 16 | 16×16 | uniform | causal | 0.0161 | 0.0217 | 62.3× | > 0.100 | mp50 |"));
  CHECK_THAT(md, Contains("- n=16 uniform none: naive-fp32 FAILED: O[0][0][3][1] is NaN"));
  CHECK(std::filesystem::is_regular_file(dir.sub("out/charts/tightness-vs-n.svg")));
  CHECK(std::filesystem::is_regular_file(dir.sub("out/charts/power-vs-n.svg")));
}

TEST_CASE("cross shapes are charted as GB/s vs n_k under the measured bandwidth, each judged by its binding roof") {
  ScratchDir dir, scripts;
  ReportInputs inputs;
  inputs.bench_files = {fixture("bench_decode.json")};  // cross shapes only: a file the report accepts
  inputs.gnuplot = recording_gnuplot(scripts);
  const ReportResult result = write_report(inputs, dir.sub("out"));
  const std::string md = read_text(result.markdown_path);
  // 0.5 flop/byte is under the ridge (200 / 40 = 5): memory binds, 32 of 40 GB/s.
  // Its time over the read floor of the same shape and threads, measured in the same run (1.75 ms).
  CHECK_THAT(md, Contains("| fused | 1 | 16384 | 128 | none | 1 | 2.10 ms | 32.0 | 16.0 | 0.500 | "
                          "memory, 40.0 GB/s | 80 % | "
                          "1.20 |"));
  // 2 threads are judged against the all-threads bandwidth.
  // No floor was run on 2 threads: no ratio.
  CHECK_THAT(md, Contains("| fused | 1 | 16384 | 128 | none | 2 | 1.70 ms | 40.0 | 20.0 | 0.500 | "
                          "memory, 50.0 GB/s | 80 % | "
                          "— |"));
  // 37.5 flop/byte is above it: the FMA peak binds, 150 of 200 GFLOP/s.
  CHECK_THAT(md, Contains("| fused | 64 | 4096 | 128 | none | 1 | 4.00 ms | 4.00 | 150 | 37.5 | FMA, 200 GFLOP/s | 75 % |"));
  // 2 threads: against the peak probed on 2 threads together (360), not twice one core's.
  CHECK_THAT(md, Contains("| fused | 64 | 4096 | 128 | none | 2 | 2.50 ms | 6.40 | 240 | 37.5 | "
                          "FMA, 360 GFLOP/s | 67 % |"));
  // The child's own compute time is shown (and judged against the floor: 2.00 / 1.75 ms), and its
  // isolation overhead flagged.
  CHECK_THAT(md, Contains("| 1.14 | 2.00 ms |"));
  // Over the FMA floor (0.5 ms) 4.20; over the slower floor, the read floor's 1.75 ms, 1.20.
  CHECK_THAT(md, Contains("| memory, 40.0 GB/s | 80 % | 1.20 | 4.20 | 1.20 | — |"));
  // 64 rows: the FMA floor (3.2 ms) is the slower: 4.00 / 0.6 = 6.67, 4.00 / 3.2 = 1.25, 1.25.
  CHECK_THAT(md, Contains("| FMA, 200 GFLOP/s | 75 % | 6.67 | 1.25 | 1.25 | — |"));
  // The floors themselves: no ratio to either floor.
  CHECK_THAT(md, Contains("| read-floor | 1 | 16384 | 128 | none | 1 | 1.75 ms | 38.4 | — | — | — | — | — | — | — "
                          "| — |"));
  CHECK_THAT(md, Contains("| fma-floor | 1 | 16384 | 128 | none | 1 | 0.500 ms | — | 67.2 | — | — | — | — | — | — "
                          "| — |"));
  CHECK_THAT(md, Contains("exec:fake/n_q:1/n_k:16384/d:128/mask:none/threads:1: wall 10.0 ms, own compute 2.00 ms: "
                          "isolation (copies, pipe or process) is 80 % of the wall time, so it dominates the wall time"));

  const std::string chart = script_titled(scripts, "Decode and cross shapes: GB/s moved vs n_k (d=128, mask=none)");
  // Both bandwidth roofs, and the conditions printed in the chart.
  CHECK_THAT(chart, Contains("40 with lines dt 2 lw 2 lc rgb \"#000000\" title \"read bandwidth, 1 thread: 40.0 GB/s\""));
  CHECK_THAT(chart, Contains("title \"read bandwidth, 2 threads: 50.0 GB/s\""));
  CHECK_THAT(chart, Contains("AMD EPYC (2 logical CPUs), 1 and 2 threads, GNU 12.2.0"));
  CHECK_THAT(chart, Contains("wall time, tensors on a 64-byte boundary"));
  CHECK_THAT(chart, Contains("read bandwidth 40.0 GB/s on 1 thread (CPU 1, as every 1-thread run), 50.0 GB/s on 2, "
                             "FMA peak 200 GFLOP/s per core, 360 on 2 together, batch 1, heads 8"));
  // Columns n_k, GB/s, memory-bound GB/s, FMA-bound GB/s, FMA roof in GB/s (200 / 37.5).
  CHECK_THAT(chart, Contains("16384 32 32 NaN NaN\n"));
  CHECK_THAT(chart, Contains("4096 4 NaN 4 5.33333333\n"));
  CHECK_THAT(chart, Contains("4096 6.4 NaN 6.4 9.6\n"));  // 360 / 37.5 on 2 threads
  const std::string html = read_text(result.html_path);
  CHECK_THAT(html, Contains("<h2>Decode and cross shapes</h2>"));
  CHECK_THAT(html, Contains("<figure id=\"decode-d128-none\">"));

  // report.json carries the same rows and verdicts of the roofline for CI to read.
  const auto report = nlohmann::json::parse(read_text(result.json_path));
  REQUIRE(report["cross_records"].size() == 9);
  CHECK(report["records"].empty());
  const std::map<std::string, nlohmann::json> by_name = records_by_benchmark(report["cross_records"]);
  const auto& decode = by_name.at("fused/n_q:1/n_k:16384/d:128/mask:none/threads:1");
  CHECK(decode["problem"]["n_q"] == 1);
  CHECK(decode["problem"]["n_k"] == 16384);
  CHECK(decode["time_seconds"].get<double>() == Approx(2.1e-3));
  CHECK(decode["roofline"]["binds"] == "memory");
  CHECK(decode["roofline"]["bandwidth_gbps"].get<double>() == Approx(40));
  CHECK(decode["roofline"]["fraction"].get<double>() == Approx(0.8));
  CHECK(decode["compute_seconds"].is_null());
  CHECK(decode["over_read_floor"].get<double>() == Approx(2.1 / 1.75));
  CHECK(decode["over_fma_floor"].get<double>() == Approx(2.1 / 0.5));
  CHECK(decode["over_slower_floor"].get<double>() == Approx(2.1 / 1.75));
  CHECK(decode["time_min_seconds"].is_null());  // one repetition
  const auto& two = by_name.at("fused/n_q:1/n_k:16384/d:128/mask:none/threads:2");
  CHECK(two["roofline"]["bandwidth_gbps"].get<double>() == Approx(50));
  CHECK(two["over_read_floor"].is_null());
  CHECK(two["over_fma_floor"].is_null());
  CHECK(two["over_slower_floor"].is_null());
  CHECK(by_name.at("read-floor/n_q:1/n_k:16384/d:128/mask:none/threads:1")["over_read_floor"].is_null());
  const auto& cross = by_name.at("fused/n_q:64/n_k:4096/d:128/mask:none/threads:1");
  CHECK(cross["roofline"]["binds"] == "FMA");
  CHECK(cross["roofline"]["peak_gflops"].get<double>() == Approx(200));
  CHECK(cross["roofline"]["fraction"].get<double>() == Approx(0.75));
  CHECK(cross["roofline"]["flop_per_byte"].get<double>() == Approx(37.5));
  CHECK(cross["over_read_floor"].get<double>() == Approx(4.0 / 0.6));
  CHECK(cross["over_fma_floor"].get<double>() == Approx(4.0 / 3.2));
  CHECK(cross["over_slower_floor"].get<double>() == Approx(4.0 / 3.2));
  CHECK(by_name.at("fma-floor/n_q:64/n_k:4096/d:128/mask:none/threads:1")["over_slower_floor"].is_null());
  const auto& cross_two = by_name.at("fused/n_q:64/n_k:4096/d:128/mask:none/threads:2");
  CHECK(cross_two["roofline"]["peak_gflops"].get<double>() == Approx(360));
  CHECK(cross_two["roofline"]["fraction"].get<double>() == Approx(240.0 / 360));
  CHECK(report["bench_runs"][0]["peak_fma_gflops_all_threads"].get<double>() == Approx(360));
  CHECK(report["bench_runs"][0]["peak_fma_threads"] == 2);
  CHECK(by_name.at("exec:fake/n_q:1/n_k:16384/d:128/mask:none/threads:1")["compute_seconds"].get<double>() ==
        Approx(2e-3));
  CHECK(by_name.at("exec:fake/n_q:1/n_k:16384/d:128/mask:none/threads:1")["over_read_floor"].get<double>() ==
        Approx(2.0 / 1.75));
}
