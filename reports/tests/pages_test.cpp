// The lab's matrices and embedded states, and the case page's data: its marks
// must be exactly compare_slice()'s cells beyond their bound.
#include <catch2/catch.hpp>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <set>
#include <string>

#include "attncheck/pages.h"
#include "attncheck/reference.h"
#include "attncheck/registry.h"
#include "attncheck/report.h"
#include "attncheck/verify.h"
#include <unistd.h>

using attncheck::Case;
using attncheck::InvalidInput;
using nlohmann::json;
namespace fs = std::filesystem;

namespace {

std::string three_decimals(const attncheck::mp50& x) {
  char text[32];
  std::snprintf(text, sizeof text, "%.3f", static_cast<double>(x));
  return text;
}

fs::path scratch(const std::string& name) {
  const fs::path dir = fs::temp_directory_path() / ("attncheck-pages-test-" + name + "-" + std::to_string(::getpid()));
  fs::remove_all(dir);
  return dir;
}

// A 1×1×5×5 causal case with d = 4 whose values are small and distinct.
Case causal_case() {
  Case c;
  c.problem.shape = {1, 2, 5, 5, 4, 3};
  c.problem.causal = attncheck::Causal::top_left;
  for (int64_t i = 0; i < c.problem.shape.q_size(); ++i) c.q.push_back(static_cast<float>((i * 7 % 11) - 5) / 4);
  for (int64_t i = 0; i < c.problem.shape.k_size(); ++i) c.k.push_back(static_cast<float>((i * 5 % 13) - 6) / 4);
  for (int64_t i = 0; i < c.problem.shape.v_size(); ++i) c.v.push_back(static_cast<float>((i * 3 % 7) - 3) / 2);
  return c;
}

std::set<std::string> marked_cells(const json& slice) {
  std::set<std::string> out;
  for (const char* name : {"A", "O"}) {
    if (!slice["implementation"].contains(name)) continue;
    const json& beyond = slice["implementation"][name]["beyond"];
    for (size_t i = 0; i < beyond.size(); ++i)
      for (size_t j = 0; j < beyond[i].size(); ++j)
        if (beyond[i][j].get<int>() == 1) out.insert(std::string(name) + "[" + std::to_string(i) + "][" + std::to_string(j) + "]");
  }
  return out;
}

}  // namespace

TEST_CASE("the lab's query 3 reads 0.376, 0.175, 0.448, 0, 0 under the causal mask at tau 0.85", "[lab]") {
  const Case lab = attncheck::lab_case();
  REQUIRE(lab.problem.shape == attncheck::Shape{1, 1, 5, 5, 3, 2});
  REQUIRE(lab.problem.temperature == 0.85);
  REQUIRE(lab.problem.causal == attncheck::Causal::top_left);
  REQUIRE(attncheck::lab_tokens() == std::vector<std::string>{"模型", "根据", "上下文", "分配", "权重"});
  const auto t = attncheck::reference_tables<attncheck::mp50>(lab.problem, lab.q, lab.k, lab.v, 0, 0);
  CHECK(three_decimals(t.A(2, 0)) == "0.376");
  CHECK(three_decimals(t.A(2, 1)) == "0.175");
  CHECK(three_decimals(t.A(2, 2)) == "0.448");
  CHECK(t.A(2, 3) == 0);
  CHECK(t.A(2, 4) == 0);
  // The chapter's point: the three shown values add to 0.999, the unrounded ones to 1.
  CHECK(abs(t.A(2, 0) + t.A(2, 1) + t.A(2, 2) - 1) < 1e-45);
}

TEST_CASE("the lab embeds every slider step with the mask on and off, from the reference", "[lab]") {
  const auto taus = attncheck::lab_temperature_labels();
  REQUIRE(taus.size() == 59);
  CHECK(taus.front() == "0.10");
  CHECK(taus.back() == "3.00");
  CHECK(std::count(taus.begin(), taus.end(), "0.85") == 1);
  CHECK(std::count(taus.begin(), taus.end(), "1.50") == 1);

  const json d = attncheck::lab_data();
  REQUIRE(d["states"].size() == 118);
  const json& s = d["states"]["0.85/1"];
  CHECK(s["A"][2] == json({"0.376", "0.175", "0.448", "0", "0"}));
  CHECK(s["M"][2] == json({"0", "0", "0", "−∞", "−∞"}));
  CHECK(s["L"][2][3] == "−∞");
  CHECK(s["rows"][2]["sum_shown"] == "0.999");
  CHECK(s["rows"][2]["sum_exact"] == "1.000000000000000");
  CHECK(s["rows"][2]["argmax"] == 3);
  CHECK(s["rows"][2]["masked"] == json({4, 5}));
  CHECK(s["O"].size() == 5);
  CHECK(s["O"][0].size() == 2);
  // L = S / τ where allowed (the chapter's step 5), to the shown three decimals.
  CHECK(std::fabs(std::stod(s["L"][2][0].get<std::string>()) - std::stod(d["S"][2][0].get<std::string>()) / 0.85) < 2e-3);

  // Flatter at τ = 1.50: entropy up; the masked weights stay exactly 0.
  const json& warm = d["states"]["1.50/1"];
  CHECK(std::stod(warm["rows"][2]["entropy"].get<std::string>()) > std::stod(s["rows"][2]["entropy"].get<std::string>()));
  CHECK(warm["A"][2][3] == "0");
  // Without the mask nothing is masked.
  const json& open = d["states"]["0.85/0"];
  for (const auto& row : open["M"])
    for (const auto& x : row) CHECK(x == "0");
  CHECK(open["rows"][2]["masked"].empty());
}

TEST_CASE("the lab page is one self-contained file", "[lab]") {
  const std::string html = attncheck::lab_page_html();
  CHECK(html.find("http://") == std::string::npos);
  CHECK(html.find("https://") == std::string::npos);
  CHECK(html.find("<script src") == std::string::npos);
  CHECK(html.find("<link") == std::string::npos);
  const size_t data = html.find("id=\"lab-data\">");
  REQUIRE(data != std::string::npos);
  const size_t end = html.find("</script>", data);
  CHECK(json::parse(html.substr(data + 14, end - data - 14))["states"].size() == 118);
}

TEST_CASE("lab -o: an unwritable directory is a clear error and writes nothing", "[lab]") {
  const fs::path dir = scratch("lab");
  fs::create_directories(dir);
  std::ofstream(dir / "file") << "x";
  CHECK_THROWS_WITH(attncheck::write_lab_page((dir / "file" / "sub").string()),
                    Catch::Contains("option -o") && Catch::Contains("cannot create"));
  CHECK_THROWS_WITH(attncheck::write_lab_page(""), Catch::Contains("option -o"));
  CHECK(!fs::exists(dir / "file" / "sub"));
  const std::string path = attncheck::write_lab_page((dir / "out").string());
  CHECK(path == (dir / "out" / "lab.html").string());
  CHECK(fs::file_size(path) > 10000);
  CHECK(!fs::exists(path + ".tmp"));
  fs::remove_all(dir);
}

TEST_CASE("a case page marks exactly the cells compare_slice finds beyond their bound", "[case]") {
  const Case c = causal_case();
  auto mutant = attncheck::make_implementation("mutant:causal_off_by_one");
  attncheck::CasePageOptions o;
  o.head = 1;
  const json d = attncheck::case_page_data(c, mutant.get(), o);
  REQUIRE(d["slices"].size() == 2);
  const json& slice = d["slices"][0];
  REQUIRE(slice["b"] == 0);
  REQUIRE(slice["h"] == 1);
  const json cmp = attncheck::compare_slice(*mutant, c, 0, 1);
  std::set<std::string> expected;
  for (const auto& cell : cmp["differing_cells"])
    expected.insert(cell["table"].get<std::string>() + "[" + std::to_string(cell["row"].get<int>()) + "][" +
                    std::to_string(cell["col"].get<int>()) + "]");
  REQUIRE(!expected.empty());
  CHECK(marked_cells(slice) == expected);
  // The off-by-one mask lets row i read key i + 1: the last row reads nothing extra.
  CHECK(expected.count("A[4][4]") == 0);
  CHECK(slice["summary"]["A"]["beyond"].get<int64_t>() + slice["summary"]["O"]["beyond"].get<int64_t>() ==
        static_cast<int64_t>(expected.size()));
  CHECK(slice["implementation"]["A"]["t"][0][1].get<std::string>().find("error ÷ bound") != std::string::npos);

  // A correct implementation: nothing marked.
  auto correct = attncheck::make_implementation("naive-fp32");
  const json fine = attncheck::case_page_data(c, correct.get(), o);
  CHECK(marked_cells(fine["slices"][0]).empty());
  CHECK(fine["slices"][0]["summary"]["O"]["beyond"] == 0);
}

TEST_CASE("a case page without an implementation shows the reference's nine tables", "[case]") {
  const Case c = causal_case();
  const json d = attncheck::case_page_data(c, nullptr, {});
  const json& ref = d["slices"][0]["reference"];
  for (const char* name : {"Q", "K", "V", "R", "S", "M", "L", "A", "O"}) CHECK(ref.contains(name));
  CHECK(ref["M"]["v"][0][1] == "−∞");
  CHECK(ref["A"]["v"][0][1] == "0");
  CHECK(ref["A"]["heat"][0][1] == -1);
  CHECK(!d["slices"][0].contains("implementation"));
}

TEST_CASE("large cases show a corner of each table and still count every cell", "[case]") {
  Case c;
  c.problem.shape = {1, 1, 50, 50, 2, 1};
  for (int64_t i = 0; i < 100; ++i) c.q.push_back(static_cast<float>(i % 5) / 5);
  c.k = c.q;
  for (int64_t i = 0; i < 50; ++i) c.v.push_back(static_cast<float>(i % 3));
  auto mutant = attncheck::make_implementation("mutant:missing_scale");
  attncheck::CasePageOptions o;
  o.max_rows = 10;
  o.max_cols = 12;
  const json d = attncheck::case_page_data(c, mutant.get(), o);
  const json& a = d["slices"][0]["implementation"]["A"];
  CHECK(a["rows"] == 50);
  CHECK(a["v"].size() == 10);
  CHECK(a["v"][0].size() == 12);
  CHECK(d["slices"][0]["summary"]["A"]["cells"] == 2500);
  CHECK(d["slices"][0]["summary"]["A"]["beyond"].get<int>() > 120);  // beyond the shown corner too
}

TEST_CASE("case pages reject bad input before writing anything", "[case]") {
  Case c = causal_case();
  attncheck::CasePageOptions o;
  o.batch = 1;
  CHECK_THROWS_AS(attncheck::case_page_data(c, nullptr, o), InvalidInput);
  o.batch = 0;
  o.head = -1;
  CHECK_THROWS_WITH(attncheck::case_page_data(c, nullptr, o), Catch::Contains("--batch/--head"));
  c.q[3] = NAN;
  CHECK_THROWS_WITH(attncheck::case_page_data(c, nullptr, {}), Catch::Contains("Q"));

  const fs::path dir = scratch("case");
  CHECK_THROWS_WITH(attncheck::write_page("<p>x</p>", (dir / "missing" / "x.html").string(), "--html"),
                    Catch::Contains("option --html") && Catch::Contains("cannot write"));
  CHECK(!fs::exists(dir));
  CHECK(attncheck::case_page_path("failures/differential_reference-1234abcd.json") ==
        "failures/differential_reference-1234abcd.html");
}

TEST_CASE("report.html links a counterexample to the case page beside its case file", "[report]") {
  const fs::path dir = scratch("report");
  fs::create_directories(dir / "failures");
  std::ifstream in(std::string(ATTNCHECK_REPORT_FIXTURES) + "/verify_fused.json");
  json verify = json::parse(in);
  std::string* case_file = nullptr;
  for (auto& p : verify["properties"])
    if (p.contains("counterexample") && p["counterexample"].is_object()) {
      p["counterexample"]["case_file"] = (dir / "failures" / "row_sum-1a2b.json").string();
      case_file = p["counterexample"]["case_file"].get_ptr<std::string*>();
    }
  REQUIRE(case_file != nullptr);
  std::ofstream(dir / "verify.json") << verify.dump();

  attncheck::ReportInputs inputs;
  inputs.verify_files = {(dir / "verify.json").string()};
  auto html = [&] {
    const auto result = attncheck::write_report(inputs, (dir / "out").string());
    std::ifstream f(result.html_path);
    return std::string(std::istreambuf_iterator<char>(f), {});
  };
  CHECK(html().find("class=\"case-page\"") == std::string::npos);  // no page written: no link
  std::ofstream(dir / "failures" / "row_sum-1a2b.html") << "<p>page</p>";
  CHECK(html().find("<a class=\"case-page\" href=\"../failures/row_sum-1a2b.html\">") != std::string::npos);
  fs::remove_all(dir);
}
