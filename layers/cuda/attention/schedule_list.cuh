// How a pattern module names its GPU schedules, so that the kernels' instance tables are built
// from the registry's list (layers/patterns/registry.h) and no launcher writes them out.
// A module's .cuh specializes PatternSchedules for its pattern; each schedule there says which
// launches it serves (static bool serves(const Params&), exactly one per launch).
#pragma once

namespace flash {

template <class... Schedules>
struct ScheduleList {};

template <class Pattern>
struct PatternSchedules;  // { using type = ScheduleList<...>; }, in the pattern's .cuh

template <class... Lists>
struct ConcatSchedules;
template <class... A>
struct ConcatSchedules<ScheduleList<A...>> {
    using type = ScheduleList<A...>;
};
template <class... A, class... B, class... Rest>
struct ConcatSchedules<ScheduleList<A...>, ScheduleList<B...>, Rest...> {
    using type = typename ConcatSchedules<ScheduleList<A..., B...>, Rest...>::type;
};

// A schedule as a value (a generic lambda's argument names it by decltype(tag)::type).
template <class Schedule>
struct ScheduleTag {
    using type = Schedule;
};

}  // namespace flash
