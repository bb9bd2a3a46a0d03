#include "attncheck/case.h"

#include <cmath>
#include <cstdio>
#include <fmt/format.h>
#include <fstream>
#include <limits>
#include <nlohmann/json.hpp>
#include <sstream>

namespace attncheck {
namespace {

using nlohmann::json;

constexpr int kCaseFormatVersion = 1;

[[noreturn]] void fail(const std::string& source, const std::string& message) {
  throw InvalidInput(fmt::format("{}: {}", source, message));
}

int64_t get_size(const json& obj, const char* key, const std::string& where, int64_t fallback,
                 bool required) {
  if (!obj.contains(key)) {
    if (required) fail(where, fmt::format("missing field '{}'", key));
    return fallback;
  }
  const json& v = obj.at(key);
  if (!v.is_number_integer()) fail(where, fmt::format("field '{}' must be an integer", key));
  return v.get<int64_t>();
}

float to_float(const json& v, const std::string& where) {
  if (v.is_number()) return static_cast<float>(v.get<double>());
  if (v.is_string()) {
    const std::string s = v.get<std::string>();
    if (s == "nan" || s == "NaN") return std::numeric_limits<float>::quiet_NaN();
    if (s == "inf" || s == "+inf") return std::numeric_limits<float>::infinity();
    if (s == "-inf") return -std::numeric_limits<float>::infinity();
  }
  fail(where, fmt::format("'{}' is not a number (nan, inf and -inf may be written as strings)",
                          v.dump()));
}

// Flattens arbitrarily nested arrays in row-major order.
void flatten(const json& v, const std::string& where, std::vector<json>& out) {
  if (v.is_array()) {
    for (const json& e : v) flatten(e, where, out);
  } else {
    out.push_back(v);
  }
}

std::vector<float> read_tensor(const json& root, const char* key, int64_t expected,
                               const std::string& source) {
  const std::string where = fmt::format("{}: tensor {}", source, key);
  if (!root.contains(key)) fail(source, fmt::format("missing tensor '{}'", key));
  if (!root.at(key).is_array()) fail(source, fmt::format("tensor '{}' must be an array", key));
  std::vector<json> flat;
  flatten(root.at(key), where, flat);
  if (static_cast<int64_t>(flat.size()) != expected)
    throw InvalidInput(fmt::format("{} has {} values; the shape asks for {}", where, flat.size(),
                                   expected));
  std::vector<float> values;
  values.reserve(flat.size());
  for (size_t i = 0; i < flat.size(); ++i)
    values.push_back(to_float(flat[i], fmt::format("{}[{}]", where, i)));
  return values;
}

json float_json(float x) {
  if (std::isnan(x)) return "nan";
  if (std::isinf(x)) return x > 0 ? "inf" : "-inf";
  return static_cast<double>(x);  // a double holds the float exactly and prints round-trip
}

json tensor_json(const std::vector<float>& t) {
  json a = json::array();
  for (float x : t) a.push_back(float_json(x));
  return a;
}

}  // namespace

Case parse_case(const std::string& json_text, const std::string& source) {
  json root;
  try {
    root = json::parse(json_text);
  } catch (const json::exception& e) {  // parse_error, or out_of_range for a number like 1e310
    fail(source, fmt::format("malformed JSON: {}", e.what()));
  }
  if (!root.is_object()) fail(source, "a case must be a JSON object");
  Case c;
  try {
    if (root.contains("attncheck_case") && root.at("attncheck_case") != kCaseFormatVersion)
      fail(source, fmt::format("case format version {} is not supported (this build reads {})",
                               root.at("attncheck_case").dump(), kCaseFormatVersion));
    if (!root.contains("shape") || !root.at("shape").is_object())
      fail(source, "missing object 'shape'");
    const json& sh = root.at("shape");
    const std::string where = source + ": shape";
    Shape& s = c.problem.shape;
    s.batch = get_size(sh, "batch", where, 1, false);
    s.heads = get_size(sh, "heads", where, 1, false);
    s.n_q = get_size(sh, "n_q", where, 0, true);
    s.n_k = get_size(sh, "n_k", where, 0, true);
    s.d_k = get_size(sh, "d_k", where, 0, true);
    s.d_v = get_size(sh, "d_v", where, s.d_k, false);

    if (root.contains("scale") && !root.at("scale").is_null()) {
      if (!root.at("scale").is_number()) fail(source, "field 'scale' must be a number or null");
      c.problem.scale = root.at("scale").get<double>();
    }
    if (root.contains("temperature")) {
      if (!root.at("temperature").is_number()) fail(source, "field 'temperature' must be a number");
      c.problem.temperature = root.at("temperature").get<double>();
    }
    if (root.contains("causal"))
      c.problem.causal = parse_causal(root.at("causal").get<std::string>(), source + ": causal");
    if (root.contains("empty_rows"))
      c.problem.empty_rows =
          parse_empty_row_policy(root.at("empty_rows").get<std::string>(), source + ": empty_rows");
    if (root.contains("key_lengths") && !root.at("key_lengths").is_null()) {
      // Checked element by element: converting a non-integral number to int64 is undefined.
      const json& lengths = root.at("key_lengths");
      if (!lengths.is_array()) fail(source, "field 'key_lengths' must be an array of integers or null");
      for (const json& e : lengths)
        if (!e.is_number_integer()) fail(source, fmt::format("key_lengths: '{}' is not an integer", e.dump()));
      c.problem.key_lengths = lengths.get<std::vector<int64_t>>();
    }
    if (root.contains("mask") && !root.at("mask").is_null()) {
      const json& m = root.at("mask");
      if (!m.is_object()) fail(source, "field 'mask' must be an object {batch, heads, allowed}");
      ExplicitMask mask;
      mask.batch = get_size(m, "batch", source + ": mask", 1, false);
      mask.heads = get_size(m, "heads", source + ": mask", 1, false);
      if (!m.contains("allowed")) fail(source, "mask: missing field 'allowed'");
      std::vector<json> flat;
      flatten(m.at("allowed"), source + ": mask", flat);
      for (const json& e : flat) {
        if (e.is_boolean()) mask.allowed.push_back(e.get<bool>() ? 1 : 0);
        else if (e.is_number_integer()) mask.allowed.push_back(e.get<int64_t>() != 0 ? 1 : 0);
        else fail(source, fmt::format("mask: '{}' is not 0/1 or a boolean", e.dump()));
      }
      c.problem.mask = std::move(mask);
    }
    if (root.contains("labels")) {
      for (const auto& [key, value] : root.at("labels").items())
        c.labels[key] = value.is_string() ? value.get<std::string>() : value.dump();
    }
  } catch (const json::exception& e) {
    fail(source, fmt::format("a field has the wrong type: {}", e.what()));
  }
  // Sizes must be sane before tensor sizes are computed from them.
  validate_problem(c.problem);
  c.q = read_tensor(root, "q", c.problem.shape.q_size(), source);
  c.k = read_tensor(root, "k", c.problem.shape.k_size(), source);
  c.v = read_tensor(root, "v", c.problem.shape.v_size(), source);
  return c;
}

Case read_case_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw InvalidInput(fmt::format("case file '{}' cannot be opened", path));
  std::ostringstream text;
  text << in.rdbuf();
  return parse_case(text.str(), path);
}

std::string case_to_json(const Case& c) {
  const Problem& p = c.problem;
  const Shape& s = p.shape;
  json root;
  root["attncheck_case"] = kCaseFormatVersion;
  root["name"] = canonical_name(p);
  root["shape"] = {{"batch", s.batch}, {"heads", s.heads}, {"n_q", s.n_q},
                   {"n_k", s.n_k},     {"d_k", s.d_k},     {"d_v", s.d_v}};
  root["scale"] = p.scale ? json(*p.scale) : json(nullptr);
  root["temperature"] = p.temperature;
  root["causal"] = to_string(p.causal);
  root["empty_rows"] = to_string(p.empty_rows);
  if (!p.key_lengths.empty()) root["key_lengths"] = p.key_lengths;
  if (p.mask) {
    json allowed = json::array();
    for (uint8_t a : p.mask->allowed) allowed.push_back(a ? 1 : 0);
    root["mask"] = {{"batch", p.mask->batch}, {"heads", p.mask->heads}, {"allowed", allowed}};
  }
  if (!c.labels.empty()) root["labels"] = c.labels;
  root["q"] = tensor_json(c.q);
  root["k"] = tensor_json(c.k);
  root["v"] = tensor_json(c.v);
  return root.dump(1);
}

void write_case_file(const Case& c, const std::string& path) {
  const std::string text = case_to_json(c);
  const std::string tmp = path + ".tmp";
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    if (!out) throw std::runtime_error(fmt::format("cannot write case file '{}'", path));
    out << text << '\n';
    if (!out) throw std::runtime_error(fmt::format("cannot write case file '{}'", path));
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0)
    throw std::runtime_error(fmt::format("cannot move case file into place at '{}'", path));
}

}  // namespace attncheck
