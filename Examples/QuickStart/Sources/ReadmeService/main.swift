import EventKernel
import EventKernelLifecycle
import EventKernelMetrics
import Foundation
import Logging
import ServiceLifecycle

let logger = Logger(label: "app")
var configuration = EventStore.Configuration()                 // log, snapshots, Logger
configuration.instrumentation = EventKernelMetrics.make()      // after bootstrapping swift-metrics
let store = try EventStore.open(at: URL(filePath: "/var/lib/app/store"), configuration: configuration)
let group = ServiceGroup(configuration: ServiceGroupConfiguration(
    services: [EventStoreService(store: store)],    // then your HTTP server: the group stops services
    gracefulShutdownSignals: [.sigterm, .sigint],   // in reverse order, so the store closes after it
    logger: logger))
try await group.run()
