// Private to the pages: the shared style sheet and scripts, and small helpers
// for embedding data in a self-contained page.
#pragma once

#include <nlohmann/json.hpp>

#include <string>

#include "model.h"

namespace attncheck::pages {

/// The style sheet both pages share (tables, highlight, heatmap buckets h0…h10).
extern const char* const kPageCss;
/// Table and heatmap rendering both pages' scripts use (window.attnPage).
extern const char* const kPageKitJs;
/// The lab's controls and state (reads the JSON in #lab-data).
extern const char* const kLabJs;
/// The case page's slice selection and comparison (reads #case-data).
extern const char* const kCaseJs;

/// JSON for a <script type="application/json"> element: "</" is written as
/// "<\/" so that no string in the data can close the element.
std::string embed_json(const nlohmann::json& data);

/// Text escaped for HTML content and attribute values (the report's own).
using report_detail::html_escape;

/// The start of a page: doctype, charset, title and the shared style sheet.
std::string page_head(const std::string& title, const std::string& lang);

}  // namespace attncheck::pages
