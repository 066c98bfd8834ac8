// What scoring one retrieval item gave (eval/task_eval.h writes it, eval/task_report.h reads it).
#pragma once
#include <string>

struct TaskOutcome {
    std::string output;     // the continuation decoded
    bool correct = false;
    long long tokens = 0;   // the prompt's tokens the model read
};
